package hedgepgx

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/cfgerr"
)

// ErrInvalidConfig is matched (errors.Is) by every error New and
// NewFromConfigs return for a mistaken argument or Config. The error
// lists each mistake on a line of its own, with the argument or field at
// fault and what to do.
var ErrInvalidConfig = errors.New("hedgepgx: invalid configuration")

// MaxPools is the most pools a Client takes.
const MaxPools = 64

// DefaultLagInterval is how often a Client reads each server's WAL
// position when Config.LagInterval is zero.
const DefaultLagInterval = 100 * time.Millisecond

// Config configures a Client. The zero Config hedges reads with the zero
// hedge.Config, takes pools[0] as the primary, reads every server's WAL
// position every DefaultLagInterval, and puts no bound on a replica's lag.
type Config struct {
	// Hedge configures the Client's Hedger. Replicas must be 0 or the
	// number of pools; it is set to the number of pools.
	// ReapInBackground is always set: a losing copy is cancelled (see
	// "Cancellation" in the package doc) and returns its connection in
	// the background, and the caller does not wait for it; Close does.
	Hedge hedge.Config

	// Primary is the index of the primary among the pools: writes (Exec,
	// ExecLSN) go there, once, and a read that no replica can serve
	// fresh enough (WithMinLSN, MaxLag) goes there. It also serves
	// reads, like every replica.
	Primary int
	// NoPrimary says that every pool is a read replica: Exec, ExecLSN
	// and PrimaryLSN fail with ErrNoPrimary, and a read that no replica
	// can serve fresh enough fails with ErrNotCaughtUp. Primary must
	// then be 0.
	NoPrimary bool

	// LagInterval is how often each server's WAL position is read
	// (pg_last_wal_replay_lsn on a standby, pg_current_wal_insert_lsn on
	// the primary), one query per pool on a goroutine of its own that
	// Close stops. Zero means DefaultLagInterval. Negative turns the
	// reading off: no replica is then known to have any position, so a
	// read WithMinLSN goes to the primary, and MaxLag must be 0.
	LagInterval time.Duration
	// MaxLag, if not zero, keeps a replica whose last read position is
	// more than MaxLag bytes of WAL behind the most advanced server's
	// (the primary's, when there is one) out of every read: primaries
	// and hedges. A replica whose position was never read counts as
	// lagging. When every replica lags, reads go to the primary (with
	// NoPrimary, to every replica as if MaxLag were 0).
	MaxLag uint64
}

// validate checks pools (named arg in messages) and cfg, and makes the
// Hedger, reporting every mistake at once.
func validate(arg string, pools []*pgxpool.Pool, cfg Config) (*hedge.Hedger, error) {
	var errs []error
	n := len(pools)
	switch {
	case n == 0:
		errs = append(errs, fmt.Errorf("hedgepgx: %s is empty: give the primary's pool and one per read replica, two or more in all", arg))
	case n == 1:
		errs = append(errs, fmt.Errorf("hedgepgx: %s has a single pool: a hedge needs another server to go to; add the replicas' pools, or use the *pgxpool.Pool on its own", arg))
	case n > MaxPools:
		errs = append(errs, fmt.Errorf("hedgepgx: %s has %d pools: at most %d are supported", arg, n, MaxPools))
	}
	seenPool := map[*pgxpool.Pool]int{}
	seenServer := map[string]int{}
	for i, p := range pools {
		if p == nil {
			errs = append(errs, fmt.Errorf("hedgepgx: %s[%d] is nil: give one pool per server", arg, i))
			continue
		}
		if j, ok := seenPool[p]; ok {
			errs = append(errs, fmt.Errorf("hedgepgx: %s[%d] is the same *pgxpool.Pool as %s[%d]: give one pool per server", arg, i, arg, j))
			continue
		}
		seenPool[p] = i
		key := serverKey(p.Config())
		if j, ok := seenServer[key]; ok {
			errs = append(errs, fmt.Errorf("hedgepgx: %s[%d] and %s[%d] connect to the same server (%s): a hedge sent from one to the other would wait behind the very stall it escapes; give each server once", arg, i, arg, j, key))
			continue
		}
		seenServer[key] = i
	}
	switch {
	case cfg.NoPrimary && cfg.Primary != 0:
		errs = append(errs, fmt.Errorf("hedgepgx: Config.Primary = %d with Config.NoPrimary: leave Primary 0 when no pool is the primary", cfg.Primary))
	case !cfg.NoPrimary && (cfg.Primary < 0 || n > 0 && cfg.Primary >= n):
		errs = append(errs, fmt.Errorf("hedgepgx: Config.Primary = %d is not an index of %s: use 0 to %d, or set Config.NoPrimary if no pool is the primary", cfg.Primary, arg, max(n-1, 0)))
	}
	if cfg.Hedge.Replicas != 0 && cfg.Hedge.Replicas != n {
		errs = append(errs, fmt.Errorf("hedgepgx: Config.Hedge.Replicas = %d but %s has %d pools: leave it 0, it is set to the number of pools", cfg.Hedge.Replicas, arg, n))
	}
	if cfg.LagInterval < 0 && cfg.MaxLag > 0 {
		errs = append(errs, fmt.Errorf("hedgepgx: Config.MaxLag = %d with a negative Config.LagInterval: lag is known only from positions read on a schedule; set LagInterval to 0 (the default, %v) or a positive interval, or leave MaxLag 0", cfg.MaxLag, DefaultLagInterval))
	}
	hc := cfg.Hedge
	hc.Replicas = n
	hc.ReapInBackground = true
	if n < 2 || n > MaxPools {
		hc.Replicas = 0
		hc.Picker.Zones = nil
	}
	h, err := hedge.New(hc)
	if err != nil {
		errs = append(errs, cfgerr.FromHedge("hedgepgx", err)...)
	}
	if len(errs) > 0 {
		return nil, &cfgerr.Error{Errs: errs, Hedge: err, Sentinel: ErrInvalidConfig}
	}
	return h, nil
}

// serverKey names the server a pool connects to: its first host (lower
// case, a trailing dot removed) and port.
func serverKey(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	host := strings.TrimSuffix(strings.ToLower(c.Host), ".")
	return fmt.Sprintf("%s:%d", host, c.Port)
}
