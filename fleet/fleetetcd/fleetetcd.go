// Package fleetetcd keeps a fleet's hedging policy in etcd: a key per
// service holds the policy document, a key per pod says what the pod runs.
//
// A [Store] is an etcd client and a key prefix. Its [Store.Source] is a
// [fleet.Source] for [fleet.Watcher]; its [Store.Announcer] is a
// [fleet.Announcer]; [Store.Push], [Store.Get] and [Store.List] are what
// `hedge policy` runs.
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints})
//	...
//	store := fleetetcd.Store{Client: cli}
//	w, err := fleet.NewWatcher(fleet.Options{
//		Service:   "checkout",
//		Instance:  podName,
//		Source:    store.Source("checkout"),
//		Announcer: store.Announcer("checkout", podName),
//		...
//	})
//
// # Keys
//
// With the default prefix "hedge/", the policy of service checkout is at
// hedge/policy/checkout, and pod p1's status at hedge/pods/checkout/p1
// (a [fleet.PodStatus] as JSON, bound to a lease: it goes when the pod
// dies).
//
// # The watch
//
// The source reads the key, then watches it from the next revision. It
// reports each change in the store's order, and never a revision below
// one it reported. After a disconnect it watches again from the last
// revision it saw, so nothing between is lost; when etcd has compacted
// that revision away, it reports the compaction (an error matching
// rpctypes.ErrCompacted) and reads the key again. While no member can be
// reached, or the one it reaches has no leader, it reports an error every
// so often and keeps trying. A member that stops answering (a partition,
// a stopped process) is found by a progress request every
// [Source.Probe].
//
// Reads are linearizable and watches require a leader, so a member cut
// off from the others cannot serve an old document.
//
// # Pushing
//
// [Store.Push] validates the document, then writes it only if its version
// is above the stored one, in a transaction that compares the key's
// revision with the one read. Two operators who edit version 7 both push
// version 8: one wins, the other gets [ErrConflict] and pushes again on top.
//
// # Sizes
//
// etcd refuses a request over 1.5 MiB (its --max-request-bytes). A
// document over [fleet.MaxDocument] (1 MiB) is refused by Push before it
// is sent, and by the Watcher if it was written some other way.
//
// # Client settings
//
// Give the client keepalives (DialKeepAliveTime and DialKeepAliveTimeout
// of a few seconds), so that it leaves a member that stopped answering.
// etcd refuses client pings more often than every 5 s unless started with
// a smaller --grpc-keepalive-min-time.
package fleetetcd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tailcut/hedge/fleet"
)

// DefaultPrefix is the key prefix of a [Store] whose Prefix is empty.
const DefaultPrefix = "hedge/"

// ErrConflict is matched by the error of [Store.Push] when the store
// holds the same or a newer version, or another push landed while it ran.
var ErrConflict = errors.New("fleetetcd: the store holds a newer policy")

// ErrWrongService is matched by the error of [Store.Push] when the
// document names another service than the one it is pushed for.
var ErrWrongService = errors.New("fleetetcd: the document is for another service")

// Store is a fleet's policies and pod statuses in etcd.
type Store struct {
	// Client is the etcd client. The Store does not close it.
	Client *clientv3.Client
	// Prefix begins every key; empty means DefaultPrefix.
	Prefix string
}

func (s Store) prefix() string {
	if s.Prefix == "" {
		return DefaultPrefix
	}
	return s.Prefix
}

// PolicyKey is the key of service's policy document.
func (s Store) PolicyKey(service string) string { return s.prefix() + "policy/" + service }

// PodsPrefix is the prefix of service's pod keys; a pod's key is
// PodsPrefix followed by its instance name.
func (s Store) PodsPrefix(service string) string { return s.prefix() + "pods/" + service + "/" }

// Get returns service's stored document, parsed, with its raw bytes and
// its revision. With no document it returns nil, nil, 0, nil. A stored
// document that does not parse is returned raw with Parse's error.
func (s Store) Get(ctx context.Context, service string) (*fleet.Policy, []byte, int64, error) {
	resp, err := s.Client.Get(ctx, s.PolicyKey(service))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("fleetetcd: reading %s: %w", s.PolicyKey(service), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil, 0, nil
	}
	kv := resp.Kvs[0]
	p, err := fleet.Parse(kv.Value)
	if err != nil {
		return nil, kv.Value, kv.ModRevision, fmt.Errorf("fleetetcd: the stored document at %s (revision %d): %w", s.PolicyKey(service), kv.ModRevision, err)
	}
	return p, kv.Value, kv.ModRevision, nil
}

// Push validates doc and writes it as service's policy, if its version is
// above the stored one and nothing else was written meanwhile. It returns
// the revision written. Its errors match [fleet.ErrInvalidDocument] (the
// document is refused whole), [ErrWrongService] or [ErrConflict], and say
// what to do. A stored document that does not parse may be replaced by
// any valid one.
func (s Store) Push(ctx context.Context, service string, doc []byte) (int64, error) {
	p, err := fleet.Parse(doc)
	if err != nil {
		return 0, err
	}
	if p.Service != service {
		return 0, fmt.Errorf("%w: it says service %q, and is pushed for %q: fix its service field, or push it with --service %s", ErrWrongService, p.Service, service, p.Service)
	}
	key := s.PolicyKey(service)
	cur, _, rev, err := s.Get(ctx, service)
	if err != nil && rev == 0 {
		return 0, err
	}
	if cur != nil && cur.Version >= p.Version {
		return 0, fmt.Errorf("%w: %s holds version %d (revision %d) and this document is version %d: someone pushed since you read it; take the stored one (`hedge policy get`), make your change on top, and push it as version %d", ErrConflict, key, cur.Version, rev, p.Version, cur.Version+1)
	}
	resp, err := s.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(doc))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("fleetetcd: writing %s: %w", key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: another push to %s landed while this one ran (it read revision %d): take the stored one (`hedge policy get`), make your change on top, and push it with a higher version", ErrConflict, key, rev)
	}
	return resp.Header.Revision, nil
}

// List returns the status of every pod of service that announced itself
// and is alive, by instance name.
func (s Store) List(ctx context.Context, service string) ([]fleet.PodStatus, error) {
	prefix := s.PodsPrefix(service)
	resp, err := s.Client.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("fleetetcd: listing %s: %w", prefix, err)
	}
	var pods []fleet.PodStatus
	for _, kv := range resp.Kvs {
		var ps fleet.PodStatus
		if err := json.Unmarshal(kv.Value, &ps); err != nil {
			ps = fleet.PodStatus{
				Service:  service,
				Instance: strings.TrimPrefix(string(kv.Key), prefix),
				State:    "unreadable",
				Error:    fmt.Sprintf("the pod's status at %s is not JSON: %v", kv.Key, err),
			}
		}
		pods = append(pods, ps)
	}
	slices.SortFunc(pods, func(a, b fleet.PodStatus) int { return cmp.Compare(a.Instance, b.Instance) })
	return pods, nil
}

// Source returns a [fleet.Source] that watches service's policy key.
func (s Store) Source(service string) *Source {
	return &Source{Probe: DefaultProbe, client: s.Client, key: s.PolicyKey(service)}
}

// DefaultProbe is a Source's Probe unless set otherwise.
const DefaultProbe = 5 * time.Second

// Source watches one service's policy key. Make it with [Store.Source].
type Source struct {
	// Probe is how long the source waits for a sign of life from the
	// member it watches before it reports the store lost and watches
	// again: every Probe without news it requests progress, and a
	// request unanswered for Probe ends the watch. It also bounds each
	// read. Set it before Watch.
	Probe time.Duration

	client *clientv3.Client
	key    string
}

// String names the source: "etcd KEY".
func (s *Source) String() string { return "etcd " + s.key }

// sourceState is what one Watch call knows.
type sourceState struct {
	report  func(fleet.Report)
	last    int64  // the highest revision reported
	lastDoc []byte // the last document reported; nil when deleted
	lastDel bool   // whether the last report was Deleted
	seen    bool   // whether a document or Deleted was reported
	failed  bool   // whether the last report was an error
}

// emit reports a document (or its deletion) at rev, unless rev is below
// one reported before.
func (st *sourceState) emit(doc []byte, deleted bool, rev int64) {
	if rev < st.last {
		return
	}
	st.last, st.lastDoc, st.lastDel, st.seen, st.failed = rev, doc, deleted, true, false
	st.report(fleet.Report{Doc: doc, Deleted: deleted, Revision: rev})
}

func (st *sourceState) fail(err error) {
	st.failed = true
	st.report(fleet.Report{Err: err})
}

// Watch reports the document, then every change, until ctx ends. It
// returns ctx's error.
func (s *Source) Watch(ctx context.Context, report func(fleet.Report)) error {
	probe := s.Probe
	if probe <= 0 {
		probe = DefaultProbe
	}
	st := &sourceState{report: report}
	var next int64 // the revision to watch from; 0 to read first
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		if next == 0 {
			rctx, cancel := context.WithTimeout(ctx, probe)
			resp, err := s.client.Get(rctx, s.key)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				st.fail(fmt.Errorf("fleetetcd: reading %s: %w", s.key, err))
				if !sleep(ctx, pause) {
					break
				}
				pause = min(2*pause, probe)
				continue
			}
			pause = 100 * time.Millisecond
			if len(resp.Kvs) == 0 {
				st.emit(nil, true, resp.Header.Revision)
			} else {
				st.emit(resp.Kvs[0].Value, false, resp.Kvs[0].ModRevision)
			}
			next = resp.Header.Revision + 1
		}
		err := s.watch(ctx, st, &next, probe)
		if ctx.Err() != nil {
			break
		}
		if !st.failed {
			pause = 100 * time.Millisecond // it worked for a while: retry soon
		}
		if errors.Is(err, rpctypes.ErrCompacted) {
			st.fail(fmt.Errorf("fleetetcd: watching %s from revision %d: %w; reading it again", s.key, next, err))
			next = 0
			continue
		}
		st.fail(fmt.Errorf("fleetetcd: watching %s: %w", s.key, err))
		if !sleep(ctx, pause) {
			break
		}
		pause = min(2*pause, probe)
	}
	return ctx.Err()
}

// errSilent is the watch's error when the member stopped answering.
var errSilent = errors.New("the etcd member stopped answering (no progress within the probe time): watching again")

// errNotOpened is the watch's error when no member took it in time.
var errNotOpened = errors.New("no etcd member took the watch within the probe time: watching again")

// watch watches from *next until the watch fails, advancing *next past
// every revision it has seen.
func (s *Source) watch(ctx context.Context, st *sourceState, next *int64, probe time.Duration) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// Watch waits until the client's stream takes the request, which it
	// does not while the client reconnects: give up after probe.
	opening := time.AfterFunc(probe, cancel)
	wch := s.client.Watch(wctx, s.key, clientv3.WithRev(*next), clientv3.WithCreatedNotify(), clientv3.WithProgressNotify())
	if !opening.Stop() {
		return errNotOpened
	}
	timer := time.NewTimer(probe)
	defer timer.Stop()
	asked := false // a progress request is waiting for its answer
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			if asked {
				return errSilent
			}
			asked = true
			// The request waits while the client reconnects: bound it.
			rctx, rcancel := context.WithTimeout(wctx, probe)
			err := s.client.RequestProgress(rctx)
			rcancel()
			if err != nil {
				return fmt.Errorf("requesting progress: %w", err)
			}
			timer.Reset(probe)
		case resp, ok := <-wch:
			if !ok {
				return errors.New("the watch ended")
			}
			if err := resp.Err(); err != nil {
				return err
			}
			asked = false
			timer.Reset(probe)
			if resp.Created && st.failed && st.seen {
				// The store is back and nothing newer came before
				// this revision: what was reported stands.
				st.emit(st.lastDoc, st.lastDel, st.last)
			}
			if n := len(resp.Events); n > 0 {
				// Only the newest matters: one key, in order.
				ev := resp.Events[n-1]
				if ev.Type == clientv3.EventTypeDelete {
					st.emit(nil, true, ev.Kv.ModRevision)
				} else {
					st.emit(ev.Kv.Value, false, ev.Kv.ModRevision)
				}
				*next = max(*next, ev.Kv.ModRevision+1)
			}
			if resp.IsProgressNotify() {
				*next = max(*next, resp.Header.Revision+1)
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// DefaultTTL is an Announcer's lease time unless set otherwise.
const DefaultTTL = 10 * time.Second

// Announcer returns a [fleet.Announcer] that keeps instance's status at
// its key under [Store.PodsPrefix], bound to a lease it keeps alive. Call
// Close when the pod stops.
func (s Store) Announcer(service, instance string) *Announcer {
	ctx, cancel := context.WithCancel(context.Background())
	return &Announcer{
		TTL:    DefaultTTL,
		client: s.Client,
		key:    s.PodsPrefix(service) + instance,
		ctx:    ctx,
		cancel: cancel,
	}
}

// Announcer keeps a pod's status in etcd, under a lease: when the pod
// dies, the lease runs out after TTL and the key goes. Make it with
// [Store.Announcer].
type Announcer struct {
	// TTL is the lease's time to live; set it before the first Announce.
	// etcd rounds a TTL under its minimum (1.5 election timeouts) up.
	TTL time.Duration

	client *clientv3.Client
	key    string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	lease  clientv3.LeaseID
	status []byte // the last status announced
	closed bool
}

// Announce writes s at the pod's key, under the pod's lease. If the lease
// was lost (the pod was cut off from etcd for longer than TTL), a new
// one is taken, here or by the keep-alive as soon as it notices.
func (a *Announcer) Announce(ctx context.Context, s fleet.PodStatus) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("fleetetcd: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return errors.New("fleetetcd: Announce after Close")
	}
	a.status = b
	return a.putLocked(ctx)
}

// putLocked writes the last status under the lease, taking a lease first
// if there is none, and once more if the lease was gone.
func (a *Announcer) putLocked(ctx context.Context) error {
	for try := 0; ; try++ {
		if a.lease == 0 {
			if err := a.grantLocked(ctx); err != nil {
				return err
			}
		}
		_, err := a.client.Put(ctx, a.key, string(a.status), clientv3.WithLease(a.lease))
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && try == 0 {
			a.lease = 0
			continue
		}
		if err != nil {
			return fmt.Errorf("fleetetcd: announcing at %s: %w", a.key, err)
		}
		return nil
	}
}

func (a *Announcer) grantLocked(ctx context.Context) error {
	if a.closed {
		return errors.New("fleetetcd: the Announcer is closed")
	}
	ttl := int64((a.TTL + time.Second - 1) / time.Second)
	if ttl < 1 {
		ttl = int64(DefaultTTL / time.Second)
	}
	g, err := a.client.Grant(ctx, ttl)
	if err != nil {
		return fmt.Errorf("fleetetcd: taking a lease for %s: %w", a.key, err)
	}
	ch, err := a.client.KeepAlive(a.ctx, g.ID)
	if err != nil {
		return fmt.Errorf("fleetetcd: keeping the lease of %s alive: %w", a.key, err)
	}
	a.lease = g.ID
	a.wg.Add(1)
	go a.keepAlive(g.ID, ch)
	return nil
}

// keepAlive drains the lease's keep-alive answers. When they end and the
// Announcer is open, the lease is lost: it takes a new one and announces
// the last status again, until that works, Announce does it, or Close.
func (a *Announcer) keepAlive(id clientv3.LeaseID, ch <-chan *clientv3.LeaseKeepAliveResponse) {
	defer a.wg.Done()
	for range ch {
	}
	pause := 100 * time.Millisecond
	for {
		a.mu.Lock()
		if a.closed || a.lease != id {
			a.mu.Unlock()
			return
		}
		a.lease = 0
		ctx, cancel := context.WithTimeout(a.ctx, a.TTL)
		err := a.putLocked(ctx)
		cancel()
		a.mu.Unlock()
		if err == nil {
			return // the new lease has a keepAlive of its own
		}
		id = 0
		if !sleep(a.ctx, pause) {
			return
		}
		pause = min(2*pause, a.TTL)
	}
}

// Close stops the keep-alive and revokes the lease, so that the pod's key
// goes at once. It does not close the client.
func (a *Announcer) Close() error {
	a.mu.Lock()
	a.closed = true
	id := a.lease
	a.lease = 0
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
	if id == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.client.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("fleetetcd: revoking the lease of %s (the key goes when it runs out): %w", a.key, err)
	}
	return nil
}

var (
	_ fleet.Source    = (*Source)(nil)
	_ fleet.Announcer = (*Announcer)(nil)
)
