// Package fleetbench is the logic of "hedge bench fleet": it measures how
// a policy push reaches a fleet of watchers (package fleet), through a
// three-member etcd cluster on loopback and through a file updated the
// way kubelet updates a ConfigMap volume.
//
// # What runs
//
// The parent process starts the store (etcdtest: three etcd processes;
// or a ConfigMap-style directory, ConfigMapDir) and several worker
// processes: the same binary again, with WorkerEnv set, which calls
// MaybeRunWorker first thing. Each worker runs its share of the
// watchers. A watcher is what a pod runs: a fleet.Watcher with a store
// client of its own (an etcd client and lease, or the file source), a
// Hedger under light synthetic traffic (a Poisson stream of calls, 3% of
// them slow enough for a hedge), and an Announcer with etcd.
//
// # How a push is timed
//
// The parent reads the wall clock just before a push. Each worker reports
// every apply as it happens, on its stdout, with the wall clock it read
// in the watcher's event callback. One machine has one wall clock
// (CLOCK_REALTIME) for every process, so the two subtract; the report's
// times are from a push's start to each watcher's apply, over every
// watcher of every push. A watcher that has not applied a push within
// Options.Bound is a miss, counted and not hidden.
//
// # Scenarios
//
// With etcd: plain pushes; pushes while a follower is killed (SIGKILL at
// the moment the push starts); pushes while the leader is killed, retried
// until the store accepts them; the kill switch; invalid documents; and a
// push after every member was killed and restarted. After a kill the
// member is restarted on its data, and the watchers not on the latest
// version within the bound are counted. After the whole store restarted,
// the pods etcd lists on the latest version are counted too (what `hedge
// policy status` shows: each watcher announces itself under a lease). With the file: plain pushes (each
// a symlink swap), the kill switch and invalid documents.
//
// The kill switch row counts the hedges each watcher's Hedger sent (its
// Stats) after the watcher applied "off", until Options.Hold after the
// last one did, and the calls made meanwhile; the hedges sent in the same
// span before the push show that the traffic hedges at all. The invalid
// documents row pushes documents every watcher must refuse (a mode that
// does not exist, a rollout above 1, an unknown field, another service's
// document, an older version, broken YAML), waits until every watcher
// reported refusing each, and counts the applies meanwhile.
//
// # What it is not
//
// The bench writes documents to the store directly, without `hedge
// policy push` and its compare-and-swap, so that it can write invalid
// ones too. Parent, workers and store share one machine and its cores.
package fleetbench
