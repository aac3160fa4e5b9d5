package bench

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingClient records the requests it is asked for; its Stats count
// them, with one hedge per ten.
type countingClient struct {
	mu     sync.Mutex
	ids    []int
	fanned int // requests that carried a fan-out mark
	closed bool
	fail   int // request id that fails, or -1
}

var errLeaf = errors.New("leaf failed")

func (c *countingClient) Do(ctx context.Context, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, i)
	if ctx != context.Background() {
		c.fanned++ // a context derived for the fan-out (hedge.WithFanOut)
	}
	if i == c.fail {
		return errLeaf
	}
	return nil
}

func (c *countingClient) Stats() ClientStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := UnknownStats()
	s.Requests, s.Hedges, s.HedgeWins = int64(len(c.ids)), int64(len(c.ids)/10), 0
	s.Wasted, s.Delay = time.Duration(len(c.ids)), time.Duration(len(c.ids))
	return s
}

func (c *countingClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func countingContender(made *[]*countingClient, fail int) Contender {
	return Contender{Name: "count", New: func(Backend) (Client, error) {
		c := &countingClient{fail: fail}
		*made = append(*made, c)
		return c, nil
	}}
}

func TestManyClientsSplitsTheTraffic(t *testing.T) {
	var made []*countingClient
	c := ManyClients(countingContender(&made, -1), 4)
	cl, err := c.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4000
	for i := range n {
		if err := cl.Do(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	if len(made) != 4 {
		t.Fatalf("%d clients made, want 4", len(made))
	}
	seen := map[int]bool{}
	for k, m := range made {
		// Each share is binomial(4000, 1/4): 1000 ± 27.
		if len(m.ids) < 850 || len(m.ids) > 1150 {
			t.Errorf("client %d got %d of %d requests, want about %d", k, len(m.ids), n, n/4)
		}
		for _, id := range m.ids {
			if seen[id] {
				t.Errorf("request %d sent twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct requests sent, want %d", len(seen), n)
	}
	// The split depends on the request number alone, so every
	// configuration of a repeat splits its arrivals alike: a second set
	// of clients gets the same requests.
	var again []*countingClient
	cl2, err := ManyClients(countingContender(&again, -1), 4).New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		cl2.Do(context.Background(), i)
	}
	for k := range made {
		if !slices.Equal(made[k].ids, again[k].ids) {
			t.Errorf("client %d got other requests the second time", k)
		}
	}
	cl2.Close()
	st := cl.Stats()
	var hedges int64
	for _, m := range made {
		hedges += int64(len(m.ids) / 10)
	}
	if st.Requests != n || st.Hedges != hedges || st.Wasted != n {
		t.Errorf("summed stats %+v: want %d requests, %d hedges, %d wasted", st, n, hedges, n)
	}
	if st.Dials != Unknown {
		t.Errorf("dials %d: an unknown counter must stay unknown when summed", st.Dials)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	for k, m := range made {
		if !m.closed {
			t.Errorf("client %d not closed", k)
		}
	}
	if one := ManyClients(countingContender(&made, -1), 1); one.New == nil {
		t.Error("ManyClients with one client lost the contender")
	}
}

func TestFanOutSendsEveryLeaf(t *testing.T) {
	var made []*countingClient
	c := FanOut(countingContender(&made, 7*5+3), 5)
	cl, err := c.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		err := cl.Do(context.Background(), i)
		if i == 7 {
			if !errors.Is(err, errLeaf) {
				t.Errorf("request 7: %v, want its failed leaf's error", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	m := made[0]
	if len(m.ids) != 50 || m.fanned != 50 {
		t.Fatalf("%d leaves sent, %d with the fan-out's context, want 50 and 50", len(m.ids), m.fanned)
	}
	seen := map[int]bool{}
	for _, id := range m.ids {
		seen[id] = true
	}
	for id := range 50 {
		if !seen[id] {
			t.Errorf("leaf %d not sent", id)
		}
	}
}

// runFanOutHTTP runs strategy once against three real HTTP replicas with
// stalls, each request reading fanOut leaves, split among clients
// clients, and checks what every such run must show: every request
// answered, and every leaf reaching a replica once. The servers' counters
// are read when measuring starts, after some measured leaves may have
// arrived, and the warm-up's late ones add: a few percent either way. A
// leaf missing from each request would be -1/fanOut.
func runFanOutHTTP(t *testing.T, strategy string, clients, fanOut int) (*RunResult, Scenario) {
	t.Helper()
	b, err := StartHTTP(HTTPOptions{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := Scenario{
		Rate: 100, Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond,
		StallLength: 20 * time.Millisecond, StallShare: 0.05, Repeats: 1, Seed: 9,
		MaxReruns: -1, MaxTotalReruns: -1, Settle: 10 * time.Millisecond,
		Clients: clients, FanOut: fanOut,
		// Behaviour, not latency: a request on a saturated machine may
		// take seconds, and must not fail for it.
		Timeout: time.Minute, MaxInFlight: 1 << 20,
	}
	st, err := LookupStrategy(strategy)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), b, s, []Contender{StrategyContender(st, StrategyOptions{}, false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if r.Requests == 0 || r.Errors != 0 {
		t.Fatalf("%d requests, %d errors (%s)", r.Requests, r.Errors, r.FirstError)
	}
	if r.ServerExtraPct < -10 || r.ServerExtraPct >= 100 {
		t.Errorf("servers' extra %.1f%% over the leaves: want from about 0 to below 100%%", r.ServerExtraPct)
	}
	return &r, s
}

// TestRunHTTPClientsAndFanOut runs many clients of fan-out requests
// against real HTTP replicas: every request answered, every leaf reaching
// a replica, and each client dialling connections of its own.
func TestRunHTTPClientsAndFanOut(t *testing.T) {
	r, s := runFanOutHTTP(t, "default", 5, 4)
	if r.Dials < int64(s.Clients) {
		t.Errorf("%d dials for %d clients: each must have connections of its own", r.Dials, s.Clients)
	}
}

// TestRunHTTPFanCall runs the fan-out call (default-fan) against real
// HTTP replicas with stalls: every request answered and every leaf
// reaching a replica; and a backend without a LeafReader is refused with
// a message naming it.
func TestRunHTTPFanCall(t *testing.T) {
	runFanOutHTTP(t, "default-fan", 1, 8)
	st, err := LookupStrategy("default-fan")
	if err != nil {
		t.Fatal(err)
	}
	_, err = StrategyContender(st, StrategyOptions{}, false).New(noLeaves{})
	if err == nil || !strings.Contains(err.Error(), "LeafReader") {
		t.Errorf("a backend without a LeafReader: %v", err)
	}
}

// noLeaves is a backend without a LeafReader.
type noLeaves struct{ Backend }

func (noLeaves) Name() string  { return "test" }
func (noLeaves) Replicas() int { return 3 }
