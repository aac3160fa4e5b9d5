package fleet

import (
	"context"
	"time"
)

// A Source watches the store that holds a service's policy document and
// reports what it sees. The file source is in this package; package
// fleetetcd watches an etcd key and package fleetfeature an OpenFeature
// flag.
//
// Watch runs until ctx ends, calling report from one goroutine at a
// time, in the order the store gave. It returns ctx's error, or an error
// that says why the source cannot go on at all (a mistaken address, a
// refused credential). A store that cannot be reached for now is not
// such an error: Watch reports it (Report.Err) and keeps trying.
type Source interface {
	Watch(ctx context.Context, report func(Report)) error
	// String names the source for logs and status, without credentials:
	// "file /etc/hedge/policy.yaml", "etcd hedge/policy/checkout".
	String() string
}

// Report is one thing a [Source] saw.
type Report struct {
	// Doc is the document as stored (JSON or YAML). It is nil when
	// Deleted or Err is set.
	Doc []byte
	// Revision is the store's own order of what it holds (etcd's mod
	// revision), or 0 when the store has none. A report whose Revision
	// is below the applied one's is stale and is not applied.
	Revision int64
	// Deleted says the document is gone from the store.
	Deleted bool
	// Err says the store cannot be read now: unreachable, a watch cut,
	// a compaction being caught up. The last good policy stays in force.
	// A later report with a document or Deleted says the store is back.
	Err error
}

// An Announcer publishes what a pod runs, so that one command lists the
// fleet (package fleetetcd keeps a key per pod, bound to a lease).
type Announcer interface {
	Announce(ctx context.Context, s PodStatus) error
}

// PodStatus is what one pod runs, as an [Announcer] publishes it and
// `hedge policy status` lists it.
type PodStatus struct {
	Service  string `json:"service"`
	Instance string `json:"instance"`
	// Version is the applied document's version; 0 while the pod runs
	// the Config in its code.
	Version int64 `json:"version"`
	// Revision is the store's revision of the applied document.
	Revision int64 `json:"revision,omitempty"`
	// Applied is when the pod applied it.
	Applied time.Time `json:"applied,omitzero"`
	// State is "applied", "code" (no document yet: the Config in code),
	// "stale" (the store is lost, the last good document stays) or
	// "fallback" (the store was lost for too long).
	State string `json:"state"`
	// Error is the last document or store error, if any.
	Error string `json:"error,omitempty"`
	// Source names the source.
	Source string `json:"source"`
}
