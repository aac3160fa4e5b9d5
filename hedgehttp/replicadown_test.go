package hedgehttp_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// TestOneReplicaDown closes one of three real replicas mid-run, under the
// zero hedge.Config: no call fails (a request whose connection is refused
// never reached a server, so it goes to another replica at once, outside
// the budget), and once the Hedger has seen the replica fail
// three times in a row it sends it nothing but a probe now and then, the
// first after a second and each later one after twice as long as the one
// before, up to 30 seconds (the probation of package hedge's doc).
// The probation's rule, as package hedge's doc gives it: this many failed
// copies in a row put a replica out of the picks for probationTime, then
// for twice as long after each failed probe, up to maxProbationTime.
const (
	probationFailures = 3
	probationTime     = time.Second
	maxProbationTime  = 30 * time.Second
)

func TestOneReplicaDown(t *testing.T) {
	ok := func(s *server, w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }
	var srv [3]*server
	var urls []string
	for i := range srv {
		srv[i] = newServer(t, ok)
		urls = append(urls, srv[i].URL)
	}
	h := newHedger(t, hedge.Config{Replicas: len(urls)})
	tr := newTransport(t, nil, h, hedgehttp.Config{Replicas: urls})
	client := &http.Client{Transport: tr}

	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, urls[0]+"/item", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		readAll(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return nil
	}
	for range 100 {
		if err := call(); err != nil {
			t.Fatalf("before the replica went down: %v", err)
		}
	}
	before := h.ReplicaStats()[1]
	tr.CloseIdleConnections()
	srv[1].Close() // refuses connections from now on
	down := time.Now()

	const n = 2000
	failed := 0
	for range n {
		if err := call(); err != nil {
			failed++
			t.Logf("call failed: %v", err)
		}
	}
	elapsed := time.Since(down)
	rs := h.ReplicaStats()
	st := h.OpStats("GET")
	t.Logf("after %v: replica stats %+v; failovers %d", elapsed, rs, st.Failovers)
	if failed > n/1000 {
		t.Fatalf("%d of %d calls failed with one of three replicas down; want at most 0.1%%", failed, n)
	}
	// The copies the dead replica got: the failures that put it on
	// probation, and the probes its probations allowed in the time the
	// run took (1 s, then 2, 4, ...: a probe at each end).
	probes := 0
	for d, out := time.Duration(0), probationTime; d+out <= elapsed; d, out = d+out, min(2*out, maxProbationTime) {
		probes++
	}
	// A copy there either fails (connection refused) or is cancelled as a
	// loser: neither an error nor a failure that counts towards probation;
	// a busy machine makes the latter happen now and then.
	sent := rs[1].Copies - before.Copies
	errs := rs[1].Errors - before.Errors
	hedges := rs[1].Hedges - before.Hedges
	if wins := rs[1].Latency.Count - before.Latency.Count; wins != 0 {
		t.Fatalf("the closed replica answered %d copies", wins)
	}
	// A copy there that neither failed nor answered was cancelled because
	// another copy of its call won first (a primary whose hedge elsewhere
	// answered before the refusal came back, or a hedge whose primary
	// did): there are at most as many as hedges sent in the run.
	if most := int64(probationFailures + probes); errs > most || errs == 0 || sent-errs > st.Hedges {
		t.Fatalf("the dead replica got %d copies (%d errors, %d of them hedges) in %v, with %d hedges in all; want at most %d errors (the failures that put it on probation and one probe per probation), and each other copy cancelled by a copy of its call that won", sent, errs, hedges, elapsed, st.Hedges, most)
	}
	if !rs[1].Probation {
		t.Fatalf("the dead replica is not on probation: %+v", rs[1])
	}
	// A refused copy is replaced unless another copy of its call is still
	// running (a busy machine can start a hedge before the refusal comes
	// back), so there are at most as many failovers as refusals; that no
	// call failed above is what shows the replacements happened when
	// needed.
	if st.Failovers > errs {
		t.Fatalf("%d failovers for %d copies refused: a failover replaces a refused copy, nothing else", st.Failovers, errs)
	}
}
