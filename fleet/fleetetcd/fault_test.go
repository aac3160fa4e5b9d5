package fleetetcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetetcd"
	"github.com/tailcut/hedge/internal/etcdtest"
)

// The fault tests share one cluster of three members; each leaves every
// member running and healthy.

// pause stops each of ms (SIGSTOP).
func pause(t *testing.T, ms ...*etcdtest.Member) {
	t.Helper()
	for _, m := range ms {
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
	}
}

// resume continues each of ms (SIGCONT).
func resume(t *testing.T, ms ...*etcdtest.Member) {
	t.Helper()
	for _, m := range ms {
		if err := m.Resume(); err != nil {
			t.Fatal(err)
		}
	}
}

// urlsBut returns the client URLs of c's members other than m.
func urlsBut(c *etcdtest.Cluster, m *etcdtest.Member) []string {
	var rest []string
	for _, o := range c.Members {
		if o != m {
			rest = append(rest, o.ClientURL)
		}
	}
	return rest
}

func TestCluster(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	healthy := func(t *testing.T) {
		t.Helper()
		for _, m := range c.Members {
			resume(t, m)
			if !m.Running() {
				if err := m.Restart(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := c.WaitHealthy(bound); err != nil {
			t.Fatal(err)
		}
	}
	version := 0
	next := func(t *testing.T, via ...string) []byte {
		t.Helper()
		version++
		d := doc("checkout", version)
		push(t, newClient(t, via...), "checkout", d)
		return d
	}

	// watchFirst watches the service through a client of via, pushes a
	// version through every member and waits for it: it returns the
	// recorder and the index of that first report.
	watchFirst := func(t *testing.T, via ...string) (*recorder, int) {
		t.Helper()
		rec := watch(t, fleetetcd.Store{Client: newClient(t, via...)}.Source("checkout"))
		return rec, rec.waitFor("the first version", 0, isDoc(next(t, c.Endpoints()...)))
	}

	t.Run("MemberKilledAndRestarted", func(t *testing.T) {
		defer healthy(t)
		m := c.Members[0]
		rec, i := watchFirst(t, m.ClientURL)
		m.Kill()
		// The source says the store is lost, and goes on saying it
		// while it tries again.
		for range 3 {
			i = rec.waitFor("an error while its member is down", i+1, isErr)
		}
		d := next(t, c.Members[1].ClientURL)
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
		rec.waitFor("the version pushed while its member was down", i, isDoc(d))
	})

	t.Run("LeaderKilled", func(t *testing.T) {
		defer healthy(t)
		rec, i := watchFirst(t, c.Endpoints()...)
		lead, err := c.Leader(bound)
		if err != nil {
			t.Fatal(err)
		}
		lead.Kill()
		d := next(t, urlsBut(c, lead)...) // tries until a new leader takes it
		rec.waitFor("the version pushed after the leader died", i, isDoc(d))
	})

	t.Run("CompactionWhileBehind", func(t *testing.T) {
		defer healthy(t)
		m := c.Members[0]
		rec, i := watchFirst(t, m.ClientURL)
		m.Kill()
		i = rec.waitFor("an error while its member is down", i, isErr)
		next(t, c.Members[1].ClientURL)
		d := next(t, c.Members[1].ClientURL)
		cli := newClient(t, c.Members[1].ClientURL)
		resp, err := cli.Get(context.Background(), "any")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Compact(context.Background(), resp.Header.Revision); err != nil {
			t.Fatal(err)
		}
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
		j := rec.waitFor("the compaction", i, func(r fleet.Report) bool { return errors.Is(r.Err, rpctypes.ErrCompacted) })
		rec.waitFor("the newest version, read again after the compaction", j, isDoc(d))
	})

	t.Run("PartitionFlapping", func(t *testing.T) {
		defer healthy(t)
		// The source reaches one member, which is stopped and continued
		// over and over, while versions are pushed through the others.
		m := c.Members[0]
		rec, i := watchFirst(t, m.ClientURL)
		var d []byte
		for range 3 {
			pause(t, m)
			i = rec.waitFor("an error while its member is stopped", i, isErr)
			d = next(t, c.Members[1].ClientURL, c.Members[2].ClientURL)
			resume(t, m)
			i = rec.waitFor("the version pushed while its member was stopped", i, isDoc(d))
		}
		// Faster flaps: stopped and continued at once, a push each time.
		for range 5 {
			pause(t, m)
			d = next(t, c.Members[1].ClientURL, c.Members[2].ClientURL)
			resume(t, m)
		}
		rec.waitFor("the last version pushed while it flapped", i, isDoc(d))
	})

	t.Run("QuorumLost", func(t *testing.T) {
		defer healthy(t)
		// The source's member is cut off from the two others: it has no
		// leader, and the source says the store is lost rather than
		// serve what that member holds.
		m := c.Members[0]
		rec, i := watchFirst(t, m.ClientURL)
		pause(t, c.Members[1:]...)
		i = rec.waitFor("an error while its member has no leader", i, isErr)
		resume(t, c.Members[1:]...)
		d := next(t, c.Members[1].ClientURL)
		rec.waitFor("the version pushed once the quorum is back", i, isDoc(d))
	})

	t.Run("PartitionWithOtherMembers", func(t *testing.T) {
		defer healthy(t)
		// The source reaches every member; one stops answering. It goes
		// on through the others, whichever one it was watching on.
		rec, i := watchFirst(t, c.Endpoints()...)
		for _, m := range c.Members {
			pause(t, m)
			d := next(t, urlsBut(c, m)...)
			i = rec.waitFor("the version pushed while a member was stopped", i, isDoc(d))
			resume(t, m)
		}
	})

	t.Run("StaleMember", func(t *testing.T) {
		defer healthy(t)
		// Member 2 is stopped while two versions are pushed; the source
		// has seen both through member 0. Then member 0 dies and the
		// source can reach member 2 alone, which is behind when it
		// comes back: the source reports nothing older than what it saw.
		stale := c.Members[2]
		cli := newClient(t, c.Members[0].ClientURL)
		rec := watch(t, fleetetcd.Store{Client: cli}.Source("checkout"))
		pause(t, stale)
		next(t, c.Members[0].ClientURL)
		d := next(t, c.Members[0].ClientURL)
		i := rec.waitFor("the version the stale member lacks", 0, isDoc(d))
		seen := rec.at(i).Revision
		cli.SetEndpoints(stale.ClientURL)
		c.Members[0].Kill()
		resume(t, stale)
		d = next(t, c.Members[1].ClientURL)
		j := rec.waitFor("the version pushed after", i, isDoc(d))
		for _, r := range rec.upTo(j)[i+1:] {
			if r.Err == nil && r.Revision < seen {
				t.Errorf("revision %d reported after %d was seen", r.Revision, seen)
			}
		}
	})

	t.Run("AnnouncerOutlivesItsLease", func(t *testing.T) {
		defer healthy(t)
		// A pod cut off from etcd for longer than its lease: its key
		// goes, and comes back when the pod reaches etcd again.
		m := c.Members[0]
		ann := fleetetcd.Store{Client: newClient(t, m.ClientURL)}.Announcer("checkout", "pod-cut")
		ann.TTL = 2 * time.Second
		defer ann.Close()
		if err := ann.Announce(context.Background(), fleet.PodStatus{Service: "checkout", Instance: "pod-cut", Version: 1, State: fleet.StateApplied}); err != nil {
			t.Fatal(err)
		}
		lister := fleetetcd.Store{Client: newClient(t, c.Members[1].ClientURL, c.Members[2].ClientURL)}
		there := func(want bool) func([]fleet.PodStatus) bool {
			return func(pods []fleet.PodStatus) bool {
				for _, p := range pods {
					if p.Instance == "pod-cut" {
						return want && p.Version == 1
					}
				}
				return !want
			}
		}
		waitPods(t, lister, there(true))
		pause(t, m)
		waitPods(t, lister, there(false))
		resume(t, m)
		waitPods(t, lister, there(true))
	})

	t.Run("AnotherService", func(t *testing.T) {
		defer healthy(t)
		// A document for another service, written at this service's
		// key by hand: the source reports it as stored, and the fleet
		// refuses it for its service field (fleet.Watcher).
		cli := newClient(t, c.Endpoints()...)
		store := fleetetcd.Store{Client: cli}
		rec := watch(t, store.Source("checkout"))
		wrong := doc("search", version+1)
		if _, err := cli.Put(context.Background(), store.PolicyKey("checkout"), string(wrong)); err != nil {
			t.Fatal(err)
		}
		i := rec.waitFor("the other service's document", 0, isDoc(wrong))
		p, err := fleet.Parse(rec.at(i).Doc)
		if err != nil || p.Service != "search" {
			t.Fatalf("the reported document parses as %+v, %v", p, err)
		}
		// Push can replace it, and refuses to write one.
		if _, err := store.Push(context.Background(), "checkout", doc("search", version+2)); !errors.Is(err, fleetetcd.ErrWrongService) {
			t.Errorf("push of another service's document: %v, want ErrWrongService", err)
		}
		version++
		d := next(t, c.Endpoints()...)
		rec.waitFor("this service's document", i, isDoc(d))
	})
}
