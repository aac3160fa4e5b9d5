package hedgesql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/pgtest"
)

// TestMain runs the tests, stops the shared clusters, and then checks
// that no test left a goroutine behind (database/sql's openers, pgx's
// cancel requests, the Client's copies, pgtest's reapers).
func TestMain(m *testing.M) {
	os.Exit(shared.Run(m, func() error { return goleak.Find() }))
}

// shared is a primary with two standbys and a table t (k int, v text) of
// 100 rows, started by the first test that needs it: starting one takes
// seconds.
var shared pgtest.Shared

func replicaSet(t *testing.T) *pgtest.ReplicaSet {
	t.Helper()
	return shared.Get(t, 2, func(set *pgtest.ReplicaSet) error {
		ctx := context.Background()
		db := openDB(t, set.Primary, false)
		defer db.Close()
		if _, err := db.ExecContext(ctx, "CREATE TABLE t (k int PRIMARY KEY, v text NOT NULL); INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) AS g"); err != nil {
			return err
		}
		return set.WaitCaughtUp(ctx)
	})
}

// openDB opens a database/sql handle on c through pgx's stdlib driver.
// With keep, a cancelled query sends a cancel request and keeps its
// connection (see "Cancellation, by driver" in the package doc).
func openDB(t *testing.T, c *pgtest.Cluster, keep bool) *sql.DB {
	t.Helper()
	cc, err := pgx.ParseConfig(c.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	cc.RuntimeParams["application_name"] = appName(t)
	var opts []stdlib.OptionOpenDB
	if keep {
		// A long DeadlineDelay: a stall that outlasts it costs the
		// connection, and the tests' stalls end within milliseconds of
		// the cancel on an idle machine, not always on a busy one.
		cc.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 10 * time.Second}
		}
		opts = append(opts, stdlib.OptionShouldPing(noPing))
	}
	db := stdlib.OpenDB(*cc, opts...)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	return db
}

// noPing is the ShouldPing of the package doc's setup: stdlib pings a
// connection idle for over a second before reusing it, and a ping
// cancelled with its copy breaks the connection.
func noPing(context.Context, stdlib.ShouldPingParams) bool { return false }

// appNames holds each test's application_name.
var appNames sync.Map // *testing.T -> string

// appSeq numbers the tests' application names.
var appSeq atomic.Int64

// appName is the application_name of the test's connections, by which
// the server's pg_stat_activity tells them from others' (earlier tests'
// included, whose server processes may still be ending).
func appName(t *testing.T) string {
	if v, ok := appNames.Load(t); ok {
		return v.(string)
	}
	name := fmt.Sprintf("hedgesql %d %s", appSeq.Add(1), t.Name())
	if len(name) > 63 {
		name = name[:63]
	}
	v, _ := appNames.LoadOrStore(t, name)
	return v.(string)
}

// backends returns the server processes of the test's connections to c.
func backends(t *testing.T, c *pgtest.Cluster) map[int32]bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", appName(t))
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	set := map[int32]bool{}
	for _, p := range pids {
		set[p] = true
	}
	return set
}

// newClient returns a Client over one database per cluster, and a func
// that closes it and the databases and checks that no connection is left
// in use.
func newClient(t *testing.T, cfg Config, keep bool, clusters ...*pgtest.Cluster) (*Client, func()) {
	t.Helper()
	var dbs []*sql.DB
	for _, cl := range clusters {
		dbs = append(dbs, openDB(t, cl, keep))
	}
	c, err := New(dbs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, func() {
		t.Helper()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		for i, db := range dbs {
			if n := db.Stats().InUse; n != 0 {
				t.Errorf("database %d: %d connections in use after Close", i, n)
			}
			if err := db.Close(); err != nil {
				t.Error(err)
			}
		}
	}
}

// hedgeAfter hedges every read still running after d, with no budget and
// none of the spare-capacity or payoff rules, and picks servers
// uniformly.
func hedgeAfter(d time.Duration) Config {
	return Config{Hedge: hedge.Config{Delay: hedge.Fixed(d), NoBudget: true,
		MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1, Picker: hedge.Picker{Random: true}}}
}

// Every mistake is reported at once, each on its line, and the error
// matches ErrInvalidConfig (and hedge.ErrInvalidConfig for Config.Hedge's).
func TestConfigRefused(t *testing.T) {
	a, b := sql.OpenDB(nopConnector{}), sql.OpenDB(nopConnector{})
	defer a.Close()
	defer b.Close()
	for _, tc := range []struct {
		name  string
		dbs   []*sql.DB
		cfg   Config
		want  []string
		hedge bool
	}{
		{"empty", nil, Config{}, []string{"dbs is empty"}, false},
		{"one", []*sql.DB{a}, Config{}, []string{"single database"}, false},
		{"nil", []*sql.DB{a, nil}, Config{}, []string{"dbs[1] is nil"}, false},
		{"twice", []*sql.DB{a, a}, Config{}, []string{"dbs[1] is the same *sql.DB as dbs[0]"}, false},
		{"primary", []*sql.DB{a, b}, Config{Primary: 2}, []string{"Config.Primary = 2 is not an index of dbs: use 0 to 1"}, false},
		{"noprimary", []*sql.DB{a, b}, Config{NoPrimary: true, Primary: 1}, []string{"Config.Primary = 1 with Config.NoPrimary"}, false},
		{"several", []*sql.DB{a, nil}, Config{Primary: -1, Hedge: hedge.Config{Replicas: 3}},
			[]string{"dbs[1] is nil", "Config.Primary = -1", "Config.Hedge.Replicas = 3"}, false},
		{"hedge", []*sql.DB{a, b}, Config{Hedge: hedge.Config{MaxAttempts: -1}}, []string{"hedgesql: Config.Hedge.MaxAttempts"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.dbs, tc.cfg)
			if err == nil {
				c.Close()
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("%v does not match ErrInvalidConfig", err)
			}
			if tc.hedge != errors.Is(err, hedge.ErrInvalidConfig) {
				t.Errorf("%v: matches hedge.ErrInvalidConfig: %v, want %v", err, !tc.hedge, tc.hedge)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("%d lines, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
		})
	}
}

// nopConnector makes a *sql.DB that is never connected.
type nopConnector struct{}

func (nopConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("not connected")
}
func (nopConnector) Driver() driver.Driver { return stdlib.GetDefaultDriver() }

// Reads go to every server and come back whole; answers (no rows, a
// server's error) end a read with no hedge; writes go to the primary
// once; the read guard refuses a write; after Close, calls fail.
func TestReadsAndWrites(t *testing.T) {
	set := replicaSet(t)
	c, done := newClient(t, Config{Hedge: hedge.Config{MaxAttempts: 1, Picker: hedge.Picker{Random: true}}}, false, set.All()...)
	ctx := context.Background()
	for k := 1; k <= 60; k++ {
		var v string
		if err := c.QueryRow(ctx, "SELECT v FROM t WHERE k = $1", k).Scan(&v); err != nil || v != fmt.Sprintf("v%d", k) {
			t.Fatalf("k %d: %q, %v", k, v, err)
		}
	}
	st := c.Stats()
	for _, s := range st.Servers {
		if s.Copies == 0 || s.Wins != s.Copies {
			t.Errorf("server %d: %d copies, %d wins; want some, all won", s.Index, s.Copies, s.Wins)
		}
	}
	vs, err := Collect(ctx, c, func(r *sql.Rows) (string, error) {
		var v string
		return v, r.Scan(&v)
	}, "  /* a comment */ SELECT v FROM t WHERE k <= $1 ORDER BY k", 3)
	if err != nil || strings.Join(vs, ",") != "v1,v2,v3" {
		t.Errorf("Collect: %q, %v", vs, err)
	}
	n, err := Read(ctx, c, "count", func(ctx context.Context, db *sql.DB) (int, error) {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return 0, err
		}
		defer tx.Rollback()
		var n int
		return n, tx.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n)
	})
	if err != nil || n != 100 {
		t.Errorf("Read: %d, %v", n, err)
	}
	var v string
	if err := c.QueryRow(ctx, "SELECT v FROM t WHERE k = $1", -1).Scan(&v); !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("no row: %v, want sql.ErrNoRows", err)
	}
	var pe *pgconn.PgError
	if err := c.QueryRow(ctx, "SELECT nope FROM t").Scan(&v); !errors.As(err, &pe) || pe.Code != "42703" {
		t.Errorf("a server's error: %v, want SQLSTATE 42703", err)
	}
	if st := c.Stats().Op("SELECT nope FROM t"); st.Requests != 1 || st.Hedges != 0 {
		t.Errorf("an answer error sent %d copies beyond the first (%+v)", st.Hedges, st)
	}
	if err := c.QueryRow(ctx, "INSERT INTO t VALUES (0, 'x') RETURNING v").Scan(&v); !errors.Is(err, ErrNotRead) {
		t.Errorf("an INSERT through QueryRow: %v, want ErrNotRead", err)
	}
	if _, err := Collect(ctx, c, func(*sql.Rows) (int, error) { return 0, nil }, "DELETE FROM t"); !errors.Is(err, ErrNotRead) {
		t.Errorf("a DELETE through Collect: %v, want ErrNotRead", err)
	}
	if err := c.QueryRow(ctx, "SELECT v FROM t WHERE k = 1").Scan(v); !errors.Is(err, errBadDest) {
		t.Errorf("a non-pointer destination: %v", err)
	}
	if _, err := c.Exec(ctx, "UPDATE t SET v = v WHERE k = $1", 1); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Stats().Servers {
		if want := int64(map[bool]int{true: 1}[s.Primary]); s.Writes != want {
			t.Errorf("server %d: %d writes, want %d", s.Index, s.Writes, want)
		}
	}
	done()
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&n); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Exec(ctx, "SELECT 1"); !errors.Is(err, ErrClosed) {
		t.Errorf("Exec after Close: %v, want ErrClosed", err)
	}
}

// A stalled server holds no read: its copy is hedged to another server,
// which answers, while the stall lasts (the test ends it). With a cancel
// request handler, the losers keep their connections: none is opened
// again after the stall.
func TestHedgeEscapesStall(t *testing.T) {
	set := replicaSet(t)
	stalled := set.Standbys[1]
	c, done := newClient(t, hedgeAfter(2*time.Millisecond), true, set.Standbys[0], stalled)
	defer done()
	ctx := context.Background()
	// Open two connections to each server before the stall, outside the
	// Client (so that no hedge, and no dial a hedge abandons, is in
	// flight when they are counted). Every copy sent to the stalled
	// server from now on waits there, and its read is won by a hedge to
	// the other.
	for i := range 2 {
		db := c.DB(i)
		a, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, conn := range []*sql.Conn{a, b} {
			if err := conn.PingContext(ctx); err != nil {
				t.Fatal(err)
			}
			conn.Close() // back to the pool, open
		}
	}
	// The connections to the stalled server before the stall: a loser
	// cancelled there must give its connection back, not break it.
	before := backends(t, stalled)
	if len(before) != 2 {
		t.Fatalf("%d connections to the server about to stall, want the 2 just opened: %v", len(before), before)
	}
	s, err := stalled.Stall()
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			s.Release()
		}
	}()
	const op = "SELECT v FROM t WHERE k = $1"
	copies := c.Stats().Servers[1].Copies
	for k := 1; c.Stats().Servers[1].Copies < copies+3; k++ {
		if k > 200 {
			t.Fatalf("200 reads with one of two servers stalled, and %d copies sent to it", c.Stats().Servers[1].Copies-copies)
		}
		var v string
		if err := c.QueryRow(ctx, op, k%100+1).Scan(&v); err != nil || v != fmt.Sprintf("v%d", k%100+1) {
			t.Fatalf("read %d during the stall: %q, %v", k, v, err)
		}
	}
	st := c.Stats()
	if st.Servers[1].InFlight == 0 {
		t.Errorf("no copy waits on the stalled server: %+v", st.Servers[1])
	}
	released = true
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	// Close waits for the losers; their connections stay open: every
	// server process of a connection made before the stall still serves
	// it. (The pool's count of open connections would not do: during the
	// stall it counts dials still waiting for the stopped server.)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	after := backends(t, stalled)
	for pid := range before {
		if !after[pid] {
			t.Errorf("the connection served by process %d of the stalled server was closed (processes before the stall %v, after %v)", pid, before, after)
		}
	}
	if got := c.DB(1).Stats(); got.MaxIdleClosed+got.MaxLifetimeClosed > 0 {
		t.Errorf("the stalled server's pool closed connections: %+v", got)
	}
}

// Errors are answers or failures by the rules of the package doc.
func TestDefaultUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57014"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "53300"}, true},
		{&pgconn.PgError{Code: "42P01"}, false},
		{&pgconn.PgError{Code: "25006"}, false},
		{fmt.Errorf("wrapped: %w", driver.ErrBadConn), true},
		{sql.ErrConnDone, true},
		{errors.New("some answer"), false},
	} {
		if got := DefaultUnavailable(tc.err); got != tc.want {
			t.Errorf("DefaultUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestCheckRead(t *testing.T) {
	for _, tc := range []struct {
		sql string
		ok  bool
	}{
		{"SELECT 1", true},
		{"  (select 1)", true},
		{"-- c\nWITH x AS (SELECT 1) SELECT * FROM x", true},
		{"/* a /* nested */ one */ values (1)", true},
		{"TABLE t", true},
		{"show all", true},
		{"INSERT INTO t VALUES (1)", false},
		{"/* unclosed SELECT 1", false},
		{"-- SELECT 1", false},
		{"", false},
		{"update t set v = 1", false},
		{"SELECT 1;", true},
		{"SELECT ';'", true},
		{"SELECT 1; DELETE FROM t", false},
		{"SELECT ';' ; DELETE FROM t", false},
		{`SELECT '\' , ' ; DELETE FROM t; --'`, false}, // a backslash escapes the quote in MySQL
		{"WITH x AS (UPDATE t SET v = 1 RETURNING k) SELECT k FROM x", false},
	} {
		if err := checkRead(tc.sql); (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrNotRead) {
			t.Errorf("checkRead(%q) = %v, want ok %v", tc.sql, err, tc.ok)
		}
	}
}
