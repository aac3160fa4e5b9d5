package fleetetcd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetetcd"
	"github.com/tailcut/hedge/internal/etcdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound is how long a test waits for an outcome before it fails: a bound
// for a broken system, not a guess of how long anything takes.
const bound = time.Minute

// probe is the sources' probe time in these tests, so that a stopped
// member is noticed in seconds.
const probe = time.Second

func newClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	return newClientConfig(t, clientv3.Config{Endpoints: endpoints})
}

func newClientConfig(t *testing.T, cfg clientv3.Config) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		MaxCallSendMsgSize:   cfg.MaxCallSendMsgSize,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func doc(service string, version int) []byte {
	return fmt.Appendf(nil, "service: %s\nversion: %d\nhedgers:\n  \"*\":\n    mode: on\n", service, version)
}

// recorder keeps a source's reports and fails the test if a revision
// ever goes down.
type recorder struct {
	t       *testing.T
	mu      sync.Mutex
	reports []fleet.Report
	changed chan struct{}
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, changed: make(chan struct{})}
}

func (r *recorder) add(rep fleet.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rep.Err == nil {
		for _, old := range r.reports {
			if old.Err == nil && rep.Revision < old.Revision {
				r.t.Errorf("revision %d reported after revision %d", rep.Revision, old.Revision)
			}
		}
	}
	r.reports = append(r.reports, rep)
	close(r.changed)
	r.changed = make(chan struct{})
}

// waitFor waits until a report from index from on satisfies ok, and
// returns its index.
func (r *recorder) waitFor(what string, from int, ok func(fleet.Report) bool) int {
	r.t.Helper()
	deadline := time.After(bound)
	for {
		r.mu.Lock()
		for i := from; i < len(r.reports); i++ {
			if ok(r.reports[i]) {
				r.mu.Unlock()
				return i
			}
		}
		ch := r.changed
		n := len(r.reports)
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			r.t.Fatalf("no report of %s within %v; %d reports: %s", what, bound, n, r.String())
		}
	}
}

// upTo returns a copy of the reports before index i.
func (r *recorder) upTo(i int) []fleet.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]fleet.Report(nil), r.reports[:i]...)
}

// at returns report i.
func (r *recorder) at(i int) fleet.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reports[i]
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rep := range r.reports {
		switch {
		case rep.Err != nil:
			fmt.Fprintf(&b, "\n  err %v", rep.Err)
		case rep.Deleted:
			fmt.Fprintf(&b, "\n  deleted @%d", rep.Revision)
		default:
			fmt.Fprintf(&b, "\n  %q @%d", bytes.ReplaceAll(rep.Doc, []byte("\n"), []byte(" ")), rep.Revision)
		}
	}
	return b.String()
}

func isDoc(d []byte) func(fleet.Report) bool {
	return func(r fleet.Report) bool { return r.Err == nil && bytes.Equal(r.Doc, d) }
}

func isErr(r fleet.Report) bool { return r.Err != nil }

// watch runs src until the test ends.
func watch(t *testing.T, src *fleetetcd.Source) *recorder {
	t.Helper()
	src.Probe = probe
	rec := newRecorder(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Watch(ctx, rec.add) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch returned %v, want context.Canceled", err)
		}
	})
	return rec
}

// push pushes d through c, trying again while the cluster has no leader.
func push(t *testing.T, c *clientv3.Client, service string, d []byte) int64 {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rev, err := fleetetcd.Store{Client: c}.Push(ctx, service, d)
		cancel()
		if err == nil {
			return rev
		}
		if errors.Is(err, fleetetcd.ErrConflict) || errors.Is(err, fleet.ErrInvalidDocument) || time.Now().After(deadline) {
			t.Fatalf("push: %v", err)
		}
	}
}

func TestSourceBasics(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	cli := newClient(t, c.Endpoints()...)
	store := fleetetcd.Store{Client: cli}
	src := store.Source("checkout")
	if got, want := src.String(), "etcd hedge/policy/checkout"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	rec := watch(t, src)
	rec.waitFor("no document yet", 0, func(r fleet.Report) bool { return r.Deleted })

	d1 := doc("checkout", 1)
	rev1 := push(t, cli, "checkout", d1)
	i := rec.waitFor("version 1", 0, isDoc(d1))
	if got := rec.at(i).Revision; got != rev1 {
		t.Errorf("version 1 reported at revision %d, written at %d", got, rev1)
	}
	// A key whose name begins with this one's is another service's.
	ctx := context.Background()
	if _, err := cli.Put(ctx, store.PolicyKey("checkout2"), string(doc("checkout2", 1))); err != nil {
		t.Fatal(err)
	}
	d2 := doc("checkout", 2)
	push(t, cli, "checkout", d2)
	i = rec.waitFor("version 2", i, isDoc(d2))
	for _, r := range rec.upTo(i) {
		if bytes.Contains(r.Doc, []byte("checkout2")) {
			t.Errorf("the source reported another service's key: %q", r.Doc)
		}
	}
	if _, err := cli.Delete(ctx, store.PolicyKey("checkout")); err != nil {
		t.Fatal(err)
	}
	rec.waitFor("the deletion", i, func(r fleet.Report) bool { return r.Deleted })
}

// TestSourceUnreachableAtStart: with no member up, the source reports
// errors, and the document once a member is there.
func TestSourceUnreachableAtStart(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	m := c.Members[0]
	d := doc("checkout", 3)
	push(t, newClient(t, c.Endpoints()...), "checkout", d)
	m.Kill()
	rec := watch(t, fleetetcd.Store{Client: newClient(t, c.Endpoints()...)}.Source("checkout"))
	rec.waitFor("an error while the store is down", 0, isErr)
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	rec.waitFor("the document once the store is back", 0, isDoc(d))
}

func TestPush(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	cli := newClient(t, c.Endpoints()...)
	store := fleetetcd.Store{Client: cli, Prefix: "team/"}
	ctx := context.Background()

	if _, err := store.Push(ctx, "checkout", []byte("service: checkout\nversion: 1\nhedgers: {\"*\": {mode: sometimes}}\n")); !errors.Is(err, fleet.ErrInvalidDocument) {
		t.Errorf("push of an invalid document: %v, want fleet.ErrInvalidDocument", err)
	}
	if _, err := store.Push(ctx, "checkout", doc("search", 1)); !errors.Is(err, fleetetcd.ErrWrongService) || !strings.Contains(err.Error(), "--service search") {
		t.Errorf("push of another service's document: %v, want ErrWrongService with the flag to use", err)
	}
	if resp, err := cli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("refused pushes wrote something: %v, %v", resp, err)
	}
	rev, err := store.Push(ctx, "checkout", doc("checkout", 7))
	if err != nil {
		t.Fatal(err)
	}
	p, raw, got, err := store.Get(ctx, "checkout")
	if err != nil || p.Version != 7 || got != rev || !bytes.Equal(raw, doc("checkout", 7)) {
		t.Fatalf("Get after push: %+v %q @%d, %v; want version 7 @%d", p, raw, got, err, rev)
	}
	for _, v := range []int{7, 6} {
		if _, err := store.Push(ctx, "checkout", doc("checkout", v)); !errors.Is(err, fleetetcd.ErrConflict) || !strings.Contains(err.Error(), "as version 8") {
			t.Errorf("push of version %d over 7: %v, want ErrConflict that says to push version 8", v, err)
		}
	}

	// Two operators push their edits of version 7 at once: one wins.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			d := append(doc("checkout", 8), fmt.Sprintf("# operator %d\n", i)...)
			_, errs[i] = store.Push(ctx, "checkout", d)
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, fleetetcd.ErrConflict):
			t.Errorf("the losing push: %v, want ErrConflict", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of two concurrent pushes of version 8 won (%v), want one", won, errs)
	}
}

// TestDocumentTooLarge: a 10 MB document is refused by Push before it is
// sent, by etcd's own request limit when written directly, and by
// fleet.Parse when a server with a larger limit stored it.
func TestDocumentTooLarge(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartOptions(t, 1, etcdtest.Options{Args: []string{"--max-request-bytes", fmt.Sprint(16 << 20)}})
	def := etcdtest.Start(t, 1)
	big := append(doc("checkout", 2), "# "+strings.Repeat("x", 10<<20)+"\n"...)
	ctx := context.Background()

	cli := newClient(t, def.Endpoints()...)
	store := fleetetcd.Store{Client: cli}
	if _, err := store.Push(ctx, "checkout", big); !errors.Is(err, fleet.ErrTooLarge) {
		t.Errorf("push of 10 MB: %v, want fleet.ErrTooLarge", err)
	}
	// The client refuses to send it (its own limit is 2 MiB)...
	if _, err := cli.Put(ctx, store.PolicyKey("checkout"), string(big)); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a 10 MB put by a default client: %v, want ResourceExhausted", err)
	}
	// ... and a client that would is refused by the server's (1.5 MiB
	// and gRPC's margin over it).
	cli = newClientConfig(t, clientv3.Config{Endpoints: def.Endpoints(), MaxCallSendMsgSize: 16 << 20})
	if _, err := cli.Put(ctx, store.PolicyKey("checkout"), string(big)); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "received message larger than max") {
		t.Errorf("a 10 MB put to a default etcd: %v, want ResourceExhausted from the server", err)
	}
	// Just over etcd's request limit, under gRPC's: etcd's own error.
	over := append(doc("checkout", 2), "# "+strings.Repeat("x", 3<<19)+"\n"...)
	if _, err := cli.Put(ctx, store.PolicyKey("checkout"), string(over)); !errors.Is(err, rpctypes.ErrRequestTooLarge) {
		t.Errorf("a 1.5 MiB put to a default etcd: %v, want rpctypes.ErrRequestTooLarge", err)
	}

	cli = newClientConfig(t, clientv3.Config{Endpoints: c.Endpoints(), MaxCallSendMsgSize: 16 << 20})
	store = fleetetcd.Store{Client: cli}
	rec := watch(t, store.Source("checkout"))
	d := doc("checkout", 1)
	push(t, cli, "checkout", d)
	i := rec.waitFor("version 1", 0, isDoc(d))
	if _, err := cli.Put(ctx, store.PolicyKey("checkout"), string(big)); err != nil {
		t.Fatal(err)
	}
	i = rec.waitFor("the 10 MB document", i, func(r fleet.Report) bool { return len(r.Doc) == len(big) })
	if _, err := fleet.Parse(rec.at(i).Doc); !errors.Is(err, fleet.ErrTooLarge) {
		t.Errorf("parsing the reported 10 MB document: %v, want fleet.ErrTooLarge", err)
	}
	if _, _, _, err := store.Get(ctx, "checkout"); !errors.Is(err, fleet.ErrTooLarge) {
		t.Errorf("Get of the 10 MB document: %v, want fleet.ErrTooLarge", err)
	}
	// A valid push may replace a stored document that does not parse.
	d = doc("checkout", 3)
	push(t, cli, "checkout", d)
	rec.waitFor("version 3", i, isDoc(d))
}

func TestAnnouncer(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	ctx := context.Background()
	lister := fleetetcd.Store{Client: newClient(t, c.Endpoints()...)}

	// A pod announces, then dies without a word: its key goes with the
	// lease.
	podCli := newClient(t, c.Endpoints()...)
	dying := fleetetcd.Store{Client: podCli}.Announcer("checkout", "pod-a")
	dying.TTL = 2 * time.Second
	if err := dying.Announce(ctx, fleet.PodStatus{Service: "checkout", Instance: "pod-a", Version: 4, State: "applied"}); err != nil {
		t.Fatal(err)
	}
	live := fleetetcd.Store{Client: newClient(t, c.Endpoints()...)}.Announcer("checkout", "pod-b")
	if err := live.Announce(ctx, fleet.PodStatus{Service: "checkout", Instance: "pod-b", Version: 3, State: "stale"}); err != nil {
		t.Fatal(err)
	}
	if err := live.Announce(ctx, fleet.PodStatus{Service: "checkout", Instance: "pod-b", Version: 4, State: "applied"}); err != nil {
		t.Fatal(err)
	}
	other := fleetetcd.Store{Client: newClient(t, c.Endpoints()...)}.Announcer("search", "pod-c")
	if err := other.Announce(ctx, fleet.PodStatus{Service: "search", Instance: "pod-c", State: "code"}); err != nil {
		t.Fatal(err)
	}
	pods, err := lister.List(ctx, "checkout")
	if err != nil || len(pods) != 2 || pods[0].Instance != "pod-a" || pods[1].Instance != "pod-b" || pods[1].Version != 4 || pods[1].State != "applied" {
		t.Fatalf("List: %+v, %v; want pod-a and pod-b at version 4", pods, err)
	}
	// The pod's client goes without revoking anything; the keep-alive
	// goroutine ends with it.
	podCli.Close()
	deadline := time.Now().Add(bound)
	for {
		pods, err = lister.List(ctx, "checkout")
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead pod's key is still there after %v: %+v", bound, pods)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pods[0].Instance != "pod-b" {
		t.Fatalf("List after pod-a died: %+v, want pod-b", pods)
	}
	dying.Close()
	// Close revokes: the key goes at once.
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if pods, err := lister.List(ctx, "checkout"); err != nil || len(pods) != 0 {
		t.Fatalf("List after Close: %+v, %v; want none", pods, err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
}
