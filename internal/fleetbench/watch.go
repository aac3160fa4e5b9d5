package fleetbench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
)

// watchEvent is what a worker tells the parent of a watcher's event.
type watchEvent struct {
	applied, refused bool
	version          int64
	at               time.Time
	reason           string
}

// fleetWatcher is the part of a fleet.Watcher a worker uses.
type fleetWatcher interface {
	Run(ctx context.Context) error
	Version() int64
}

type watcher struct{ *fleet.Watcher }

func (w watcher) Version() int64 { return w.Status().Version }

// newWatcher makes watcher n of cfg over its own store client, and
// returns a function that releases what it opened.
func newWatcher(ctx context.Context, cfg WorkerConfig, n int, hedgers map[string]*hedge.Hedger, on func(watchEvent)) (fleetWatcher, func(), error) {
	opt := fleet.Options{
		Service:  cfg.Service,
		Instance: fmt.Sprintf("w%03d", n),
		Hedgers:  hedgers,
		Jitter:   cfg.Jitter,
		Logger:   slog.New(slog.DiscardHandler),
		OnEvent: func(e fleet.Event) {
			at := e.At
			if at.IsZero() {
				at = time.Now()
			}
			switch e.Kind {
			case fleet.EventApplied:
				on(watchEvent{applied: true, version: e.Version, at: at})
			case fleet.EventRefused:
				on(watchEvent{refused: true, version: e.Version, at: at, reason: string(e.Reason)})
			}
		},
	}
	closeAll := func() {}
	switch cfg.Source {
	case SourceFile:
		opt.Source = fleet.NewFile(cfg.File)
	case SourceEtcd:
		src, ann, closeClient, err := etcdSource(ctx, cfg, opt.Instance)
		if err != nil {
			return nil, nil, err
		}
		opt.Source, opt.Announcer, closeAll = src, ann, closeClient
	default:
		return nil, nil, fmt.Errorf("source %q: use etcd or file", cfg.Source)
	}
	w, err := fleet.NewWatcher(opt)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return watcher{w}, closeAll, nil
}

// effectiveMode is the mode the Hedger's requests run in: the more
// cautious of its own and the live settings'.
func effectiveMode(h *hedge.Hedger) hedge.Mode {
	return max(h.Mode(), h.Live().Settings.Mode)
}
