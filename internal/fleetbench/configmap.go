package fleetbench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ConfigMapDir writes files into a directory the way kubelet updates a
// ConfigMap mounted as a volume: each version's files go into a fresh
// hidden directory, "..data" is a symlink to it, and each file's name is a
// symlink through "..data". An update writes the new hidden directory,
// points a temporary symlink at it and renames that over "..data" (one
// atomic rename), then removes the old directory. A reader never sees a
// half-written file, and the file it watches is never written in place.
type ConfigMapDir struct {
	// Dir is the mounted volume's directory.
	Dir string

	seq  int
	prev string
}

// dataLink is the name of the symlink kubelet swaps.
const dataLink = "..data"

// Write makes files the directory's content, in one swap.
func (c *ConfigMapDir) Write(files map[string][]byte) error {
	c.seq++
	name := fmt.Sprintf("..%s.%06d", time.Now().UTC().Format("2006_01_02_15_04_05"), c.seq)
	dir := filepath.Join(c.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	tmp := filepath.Join(c.Dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(name, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(c.Dir, dataLink)); err != nil {
		return err
	}
	for f := range files {
		link := filepath.Join(c.Dir, f)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataLink, f), link); err != nil {
			return err
		}
	}
	if c.prev != "" {
		if err := os.RemoveAll(filepath.Join(c.Dir, c.prev)); err != nil {
			return err
		}
	}
	c.prev = name
	return nil
}
