package hedgesql

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// TestSeveralStatementsRefused sends reads that hide a write behind a
// first statement through pgx's stdlib in its simple protocol (what
// PgBouncer setups use), where PostgreSQL runs every statement of the
// text: each is refused with ErrNotRead before any server sees it, and
// the primary's table stays empty.
func TestSeveralStatementsRefused(t *testing.T) {
	set := replicaSet(t)
	var dbs []*sql.DB
	for _, cl := range set.All() {
		cc, err := pgx.ParseConfig(cl.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		db := stdlib.OpenDB(*cc)
		t.Cleanup(func() { db.Close() })
		dbs = append(dbs, db)
	}
	ctx := t.Context()
	if _, err := dbs[0].ExecContext(ctx, "CREATE TABLE multi_t (n int)"); err != nil {
		t.Fatal(err)
	}
	if err := set.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := New(dbs, hedgeAfter(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	writes := []string{
		"SELECT 1; INSERT INTO multi_t VALUES (%d)",
		"SELECT ';' ; INSERT INTO multi_t VALUES (%d)",
		"SELECT $$;$$, 1 /* ; */ -- ;\n; INSERT INTO multi_t VALUES (%d)",
		"SELECT E'\\';'; INSERT INTO multi_t VALUES (%d)",
		"WITH x AS (INSERT INTO multi_t VALUES (%d) RETURNING n) SELECT n FROM x",
	}
	for n := range 20 {
		for _, w := range writes {
			q := fmt.Sprintf(w, n)
			var v int
			if err := c.QueryRow(ctx, q).Scan(&v); !errors.Is(err, ErrNotRead) {
				t.Fatalf("QueryRow(%q): %v, want ErrNotRead", q, err)
			}
			_, err := Collect(ctx, c, func(r *sql.Rows) (int, error) { return v, r.Scan(&v) }, q)
			if !errors.Is(err, ErrNotRead) {
				t.Fatalf("Collect(%q): %v, want ErrNotRead", q, err)
			}
		}
	}
	var rows int
	if err := dbs[0].QueryRowContext(ctx, "SELECT count(*) FROM multi_t").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("reads inserted %d rows on the primary", rows)
	}
	// One statement, with a ';' where it does not end a statement, and a
	// trailing one, is a read. (A ';' in a dollar-quoted string is not
	// among them: MySQL reads $ as a letter, and the ';' as the end of a
	// statement.)
	for _, q := range []string{"SELECT ';' AS s;", "SELECT ';' /* ; */ -- ;\n ; ", `SELECT E'\;'`} {
		var s string
		if err := c.QueryRow(ctx, q).Scan(&s); err != nil || s != ";" {
			t.Errorf("QueryRow(%q) = %q, %v", q, s, err)
		}
	}
}
