package hedgepgx

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestCancelKeepsConnections makes hedges lose on purpose: one standby
// sleeps 20 ms in the query, the other answers at once, and every read
// whose first copy goes to the sleeper is won by its hedge 2 ms later, so
// the sleeper's copy is cancelled mid-query. It counts the connections
// the sleeper's pool makes per lost copy, after a warm-up, in the mode
// KeepConnsOnCancel sets and in pgx's default, and logs both per 1,000
// lost copies. HEDGEPGX_LOST sets how many lost copies to count (300 by
// default).
func TestCancelKeepsConnections(t *testing.T) {
	set := replicaSet(t)
	lost := 300
	if s := os.Getenv("HEDGEPGX_LOST"); s != "" {
		lost, _ = strconv.Atoi(s)
	}
	// replaced counts the connections made to replace one closed: those
	// made, less the growth of the pool.
	measure := func(keep bool) (dials, replaced, cancelled int64) {
		ps := pools(t, keep, set.Standbys...)
		cfg := hedgeNow(2 * time.Millisecond)
		cfg.NoPrimary = true
		c := client(t, ps, cfg)
		ctx := t.Context()
		slow := set.Standbys[0].Port
		read := func() {
			_, err := CollectOne(ctx, c, pgx.RowTo[string],
				"SELECT pg_sleep(CASE WHEN inet_server_port() = $1 THEN 0.02 ELSE 0 END)::text", slow)
			if err != nil {
				t.Fatal(err)
			}
		}
		// Warm up: let the sleeper's pool grow to what the cancelled
		// copies in flight (each held about 100 ms) need.
		for c.Stats().Servers[0].Cancelled < 100 {
			read()
		}
		s0 := c.Stats().Servers[0]
		for c.Stats().Servers[0].Cancelled-s0.Cancelled < int64(lost) {
			read()
		}
		s1 := c.Stats().Servers[0]
		dials = s1.Pool.NewConnsCount() - s0.Pool.NewConnsCount()
		growth := int64(s1.Pool.TotalConns() - s0.Pool.TotalConns())
		return dials, dials - growth, s1.Cancelled - s0.Cancelled
	}
	kd, kr, kc := measure(true)
	dd, dr, dc := measure(false)
	per := func(n, of int64) float64 { return 1000 * float64(n) / float64(of) }
	t.Logf("per 1000 lost copies: KeepConnsOnCancel %.1f new connections, %.1f replacing a closed one (%d, %d for %d); pgx default %.1f new, %.1f replacing (%d, %d for %d)",
		per(kd, kc), per(kr, kc), kd, kr, kc, per(dd, dc), per(dr, dc), dd, dr, dc)
	if kr*100 > kc {
		t.Errorf("KeepConnsOnCancel: %d connections replaced for %d lost copies, want at most 1 per 100", kr, kc)
	}
	if dd <= kd {
		t.Errorf("pgx's default made %d connections for %d lost copies, no more than KeepConnsOnCancel's %d: the test does not cancel queries", dd, dc, kd)
	}
}
