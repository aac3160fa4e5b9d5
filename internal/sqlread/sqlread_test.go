package sqlread

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, sql := range []string{
		"SELECT 1", "select 1", "  \n\tWITH x AS (SELECT 1) SELECT * FROM x", "(SELECT 1) UNION (SELECT 2)",
		"-- c\nSELECT 1", "/* a /* nested */ b */ VALUES (1)", "TABLE t", "show server_version",
		"SELECT 1;", "SELECT 1 ; ; -- done", "SELECT 1; /* end */", "SELECT ';'", "SELECT ''';'''",
		"SELECT E'\\';'", "SELECT e'\\\\'; ", `SELECT "a;b" FROM t`, `SELECT "a"";b" FROM t`,
		"SELECT $$;$$", "SELECT $x$ ; $y$ ; $x$", "SELECT $1::int; ", "SELECT a$b$ FROM t",
		"SELECT 1 -- ; DELETE FROM t", "SELECT 1 /* ; DELETE FROM t */", "SELECT 1 /* /* ; */ DELETE */",
		"SELECT 'a\\'", "WITH d AS (SELECT 1) SELECT * FROM d FOR UPDATE", "SELECT update FROM (SELECT 1 AS update) s",
		"SELECT U&'d\\0061t\\+000061;'", "SELECT B'1010', X'1F'", "SELECT 1.5e3, .5",
	} {
		if err := Check(sql); err != nil {
			t.Errorf("Check(%q) = %v", sql, err)
		}
	}
	for _, tc := range []struct {
		sql  string
		kind Kind
	}{
		{"", Empty}, {"  ", Empty}, {"-- SELECT 1", Empty}, {";", Empty}, {"/* c */ ; SELECT 1", Empty},
		{"INSERT INTO t VALUES (1)", NotRead}, {"update t set x = 1", NotRead}, {"DELETE FROM t", NotRead},
		{"CALL p()", NotRead}, {"/* SELECT */ DROP TABLE t", NotRead}, {"SELECTED", NotRead},
		{"COPY t TO STDOUT", NotRead}, {"1", NotRead}, {"'SELECT'", NotRead},
		{"/* unclosed SELECT 1", Unclosed}, {"SELECT 'a", Unclosed}, {`SELECT "a`, Unclosed},
		{"SELECT $$a", Unclosed}, {"SELECT $x$a$y$", Unclosed}, {"SELECT E'a\\'", Unclosed}, {"SELECT 1 /* /* */", Unclosed},
		{"SELECT 1; INSERT INTO t VALUES (1)", Several}, {"SELECT 1;INSERT INTO t VALUES (1)", Several},
		{"SELECT 1;;SELECT 2", Several}, {"SELECT ';' ; DELETE FROM t", Several}, {"SELECT $$;$$, 1 /* ; */ -- ;\n; DELETE FROM t", Several},
		{"SELECT E'\\';'; DELETE FROM t", Several}, {"SELECT 1 -- c\r; DELETE FROM t", Several}, {"SELECT 1; SELECT 2", Several},
		{"WITH x AS (INSERT INTO t VALUES (1) RETURNING n) SELECT n FROM x", WritingWith},
		{"WITH x AS MATERIALIZED ( /* c */ DELETE FROM t RETURNING *) SELECT 1", WritingWith},
		{"with a as (select 1), x as not materialized (update t set v = 1 returning v) select 1", WritingWith},
		{"WITH x AS (MERGE INTO t USING s ON true WHEN MATCHED THEN DELETE RETURNING 1) SELECT 1", WritingWith},
	} {
		err := Check(tc.sql)
		var r *Refusal
		if !errors.As(err, &r) || r.Kind != tc.kind {
			t.Errorf("Check(%q) = %v, want kind %d", tc.sql, err, tc.kind)
		}
	}
	// Read with a backslash in every string (MySQL, PostgreSQL without
	// standard_conforming_strings), these hide a second statement that
	// PostgreSQL's reading does not see.
	for _, sql := range []string{
		`SELECT '\' , ' ; DELETE FROM t; --'`, "SELECT 1 /* /* */ ; DELETE FROM t */", "SELECT $a$ ; DELETE FROM t $a$",
	} {
		if err := Check(sql); err != nil {
			t.Errorf("Check(%q) = %v; PostgreSQL reads one statement", sql, err)
		}
		var r *Refusal
		if err := Check(sql, Backslash); !errors.As(err, &r) || r.Kind != Several {
			t.Errorf("Check(%q, Backslash) = %v, want Several", sql, err)
		}
	}
	for _, sql := range []string{`SELECT "\" ; DELETE FROM t; --"`, "SELECT 1 # ;\n; DELETE FROM t"} {
		var r *Refusal
		if err := Check(sql, Backslash); !errors.As(err, &r) || r.Kind != Several {
			t.Errorf("Check(%q, Backslash) = %v, want Several", sql, err)
		}
	}
}

func TestRefusalMessages(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{"", "no statement"},
		{"INSERT INTO t", `starts with "INSERT"`},
		{"SELECT 1; DELETE", "several statements (the second starts at byte 10)"},
		{"WITH x AS (delete FROM t) SELECT 1", "holds a DELETE"},
		{"SELECT 'a", "opened at byte 7 is not closed"},
	} {
		if err := Check(tc.sql); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%q) = %v, want it to say %q", tc.sql, err, tc.want)
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"SELECT 1", "/* /* */ */ WITH", "--\nTABLE t", "((VALUES (1)))", "INSERT",
		"SELECT ';'", "SELECT $a$;$a$", "SELECT E'\\''", `SELECT "x"";"`, "SELECT 1;", "WITH x AS (DELETE FROM t) SELECT 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		err := Check(sql, Backslash)
		var r *Refusal
		if err != nil && !errors.As(err, &r) {
			t.Fatalf("Check(%q) = %v, not a *Refusal", sql, err)
		}
		if r != nil && (r.Offset < 0 || r.Offset > len(sql)) {
			t.Fatalf("Check(%q): offset %d out of the text", sql, r.Offset)
		}
		if err != nil {
			return
		}
		// A read is still a read behind a comment, and every quote in it
		// is closed: a statement after a new line and a ';' is a second
		// one, which must be refused.
		if Check("/* x */ "+sql) != nil || Check("-- x\n"+sql) != nil {
			t.Fatalf("Check(%q) accepts it, but not behind a comment", sql)
		}
		var r2 *Refusal
		if err := Check(sql + "\n; DELETE FROM t"); !errors.As(err, &r2) || r2.Kind != Several {
			t.Fatalf("Check(%q + a second statement) = %v, want Several", sql, err)
		}
	})
}
