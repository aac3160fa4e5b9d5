package hedgepgx

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestSeveralStatementsRefused sends reads that hide a write behind a
// first statement, under pgx's simple protocol (what PgBouncer setups
// use), where PostgreSQL runs every statement of the text: each is
// refused with ErrNotRead before any server sees it, and the primary's
// table stays empty.
func TestSeveralStatementsRefused(t *testing.T) {
	set := replicaSet(t)
	exec(t, set, "CREATE TABLE multi_t (n int)")
	ps := pools(t, true, set.All()...)
	for i, p := range ps {
		cfg := p.Config()
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		np, err := pgxpool.NewWithConfig(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(np.Close)
		ps[i] = np
	}
	c := client(t, ps, hedgeNow(time.Millisecond))
	ctx := t.Context()
	writes := []string{
		"SELECT 1; INSERT INTO multi_t VALUES (%d)",
		"SELECT 1;INSERT INTO multi_t VALUES (%d)",
		"SELECT ';' ; INSERT INTO multi_t VALUES (%d)",
		"SELECT $$;$$, 1 /* ; */ -- ;\n; INSERT INTO multi_t VALUES (%d)",
		"SELECT \"a;b\" FROM (SELECT 1 AS \"a;b\") s; INSERT INTO multi_t VALUES (%d)",
		"SELECT E'\\';'; INSERT INTO multi_t VALUES (%d)",
		"WITH x AS (INSERT INTO multi_t VALUES (%d) RETURNING n) SELECT n FROM x",
	}
	for n := range 20 {
		for _, w := range writes {
			sql := fmt.Sprintf(w, n)
			var v int
			errs := []error{
				c.QueryRow(ctx, sql).Scan(&v),
				func() error { _, err := c.ExecRead(ctx, sql); return err }(),
				func() error { _, err := Collect(ctx, c, pgx.RowTo[int32], sql); return err }(),
				func() error { _, err := CollectOne(ctx, c, pgx.RowTo[int32], sql); return err }(),
			}
			for i, err := range errs {
				if !errors.Is(err, ErrNotRead) {
					t.Fatalf("read method %d of %q: %v, want ErrNotRead", i, sql, err)
				}
			}
		}
	}
	var rows int
	if err := c.Primary().QueryRow(ctx, "SELECT count(*) FROM multi_t").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("reads inserted %d rows on the primary", rows)
	}
	// One statement, with a ';' where it does not end a statement, and a
	// trailing one, is a read.
	for _, sql := range []string{"SELECT ';' AS s;", "SELECT $x$;$x$ -- ;\n ; ", "SELECT 1 AS \";\" /* ; */"} {
		var s any
		if err := c.QueryRow(ctx, sql).Scan(&s); err != nil {
			t.Errorf("%q: %v", sql, err)
		}
	}
}
