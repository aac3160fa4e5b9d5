package hedgesql

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/cfgerr"
)

// ErrInvalidConfig is matched (errors.Is) by every error New returns for
// a mistaken argument or Config. The error lists each mistake on a line
// of its own, with the argument or field at fault and what to do.
var ErrInvalidConfig = errors.New("hedgesql: invalid configuration")

// MaxDBs is the most databases a Client takes.
const MaxDBs = 64

// Config configures a Client. The zero Config hedges reads with the zero
// hedge.Config, takes dbs[0] as the primary, and classifies errors by
// the rules of "Reads" in the package doc.
type Config struct {
	// Hedge configures the Client's Hedger. Replicas must be 0 or the
	// number of databases; it is set to the number of databases.
	// ReapInBackground is always set: a losing copy is cancelled and
	// returns in the background, and the caller does not wait for it;
	// Close does.
	Hedge hedge.Config

	// Primary is the index of the primary among the databases: writes
	// (Exec) go there, once. It also serves reads, like every replica.
	Primary int
	// NoPrimary says that every database is a read replica: Exec fails
	// with ErrNoPrimary and Primary returns nil. Primary must then be 0.
	NoPrimary bool

	// Unavailable, if set, reports whether an error of a copy says that
	// its server cannot serve now (the copy fails, and another goes at
	// once), rather than being an answer that ends the read. nil means
	// the rules of "Reads" in the package doc. sql.ErrNoRows, scan
	// errors and the copy's context ending are classified before it is
	// asked.
	Unavailable func(err error) bool
}

// validate checks dbs and cfg and makes the Hedger, reporting every
// mistake at once.
func validate(dbs []*sql.DB, cfg Config) (*hedge.Hedger, error) {
	var errs []error
	n := len(dbs)
	switch {
	case n == 0:
		errs = append(errs, errors.New("hedgesql: dbs is empty: give the primary's *sql.DB and one per read replica, two or more in all"))
	case n == 1:
		errs = append(errs, errors.New("hedgesql: dbs has a single database: a hedge needs another server to go to; add the replicas, or use the *sql.DB on its own"))
	case n > MaxDBs:
		errs = append(errs, fmt.Errorf("hedgesql: dbs has %d databases: at most %d are supported", n, MaxDBs))
	}
	seen := map[*sql.DB]int{}
	for i, db := range dbs {
		if db == nil {
			errs = append(errs, fmt.Errorf("hedgesql: dbs[%d] is nil: give one *sql.DB per server", i))
			continue
		}
		if j, ok := seen[db]; ok {
			errs = append(errs, fmt.Errorf("hedgesql: dbs[%d] is the same *sql.DB as dbs[%d]: give one per server, or a hedge waits behind the very stall it escapes", i, j))
			continue
		}
		seen[db] = i
	}
	switch {
	case cfg.NoPrimary && cfg.Primary != 0:
		errs = append(errs, fmt.Errorf("hedgesql: Config.Primary = %d with Config.NoPrimary: leave Primary 0 when no database is the primary", cfg.Primary))
	case !cfg.NoPrimary && (cfg.Primary < 0 || n > 0 && cfg.Primary >= n):
		errs = append(errs, fmt.Errorf("hedgesql: Config.Primary = %d is not an index of dbs: use 0 to %d, or set Config.NoPrimary if no database is the primary", cfg.Primary, max(n-1, 0)))
	}
	if cfg.Hedge.Replicas != 0 && cfg.Hedge.Replicas != n {
		errs = append(errs, fmt.Errorf("hedgesql: Config.Hedge.Replicas = %d but dbs has %d databases: leave it 0, it is set to the number of databases", cfg.Hedge.Replicas, n))
	}
	hc := cfg.Hedge
	hc.Replicas = n
	hc.ReapInBackground = true
	if n < 2 || n > MaxDBs {
		hc.Replicas = 0
		hc.Picker.Zones = nil
	}
	h, err := hedge.New(hc)
	if err != nil {
		errs = append(errs, cfgerr.FromHedge("hedgesql", err)...)
	}
	if len(errs) > 0 {
		return nil, &cfgerr.Error{Errs: errs, Hedge: err, Sentinel: ErrInvalidConfig}
	}
	return h, nil
}
