package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// DefaultPoll is how often a [File] source looks at its file by default.
const DefaultPoll = 100 * time.Millisecond

// File is a [Source] that watches a file: a policy on disk, or a
// Kubernetes ConfigMap mounted as a volume.
//
// It looks at the file every Poll, following symbolic links, and reads it
// again when what the path leads to changes: another file (kubelet's
// atomic swap of the volume's ..data link, or a rename over the path), or
// a new size or modification time (a write in place). A stat every 100 ms
// costs a few microseconds, needs no inotify watch, and sees the swap
// wherever in the chain of links it happens.
//
// A file that is missing or unreadable is reported as the store being
// unreachable ([Report.Err]): the last good policy stays. A ConfigMap
// mounted with subPath never updates: mount the whole volume.
type File struct {
	// Path is the file's path.
	Path string
	// Poll is how often the file is looked at. Zero means [DefaultPoll].
	Poll time.Duration
}

// NewFile returns a [File] source for path, looked at every [DefaultPoll].
func NewFile(path string) *File { return &File{Path: path} }

// String returns "file PATH".
func (f *File) String() string { return "file " + f.Path }

// fileID is what the path leads to: a change in it means read again.
type fileID struct {
	dev, ino uint64
	size     int64
	mtime    time.Time
}

// Watch reports the file's content at once, then each time it changes,
// until ctx ends.
func (f *File) Watch(ctx context.Context, report func(Report)) error {
	if f.Path == "" {
		return errors.New("fleet: File.Path is empty: give the policy file's path")
	}
	poll := f.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	var (
		last    fileID
		lastDoc []byte
		failed  error // the last error reported, nil after a document
		started bool
	)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		id, err := stat(f.Path)
		if err == nil && (!started || failed != nil || id != last) {
			var doc []byte
			doc, err = readFile(f.Path)
			if err == nil {
				// A file that changed identity but not content (a
				// touch, a swap to the same data) is not reported again.
				if !started || failed != nil || !bytes.Equal(doc, lastDoc) {
					report(Report{Doc: doc})
				}
				last, lastDoc, failed, started = id, doc, nil, true
			}
		}
		if err != nil && (failed == nil || err.Error() != failed.Error()) {
			failed, started = err, true
			report(Report{Err: err})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// stat returns what path leads to, links followed.
func stat(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, fmt.Errorf("fleet: policy file: %w: check the path, or the ConfigMap's volume mount", err)
	}
	if fi.IsDir() {
		return fileID{}, fmt.Errorf("fleet: policy file %s is a directory: give the file's path (a ConfigMap volume holds one file per key)", path)
	}
	id := fileID{size: fi.Size(), mtime: fi.ModTime()}
	id.dev, id.ino = devIno(fi)
	return id, nil
}

// readFile reads path, at most MaxDocument+1 bytes: Parse refuses a larger
// document with ErrTooLarge, and reading more would only cost memory.
func readFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fleet: policy file: %w: check the path and its permissions", err)
	}
	defer fh.Close()
	doc, err := io.ReadAll(io.LimitReader(fh, MaxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("fleet: policy file: %w", err)
	}
	return doc, nil
}
