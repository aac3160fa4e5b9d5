package hedgepgx

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestParseLSN(t *testing.T) {
	for in, want := range map[string]LSN{
		"0/0": 0, "16/B374D848": 0x16B374D848, "ffffffff/FFFFFFFF": ^LSN(0), "0/1": 1, "1/0": 1 << 32,
	} {
		got, err := ParseLSN(in)
		if err != nil || got != want {
			t.Errorf("ParseLSN(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/", "0/", "/0", "0/0/0", "123456789/0", "0x1/0", "-1/0", " 1/0", "g/0", "+1/2"} {
		if _, err := ParseLSN(in); !errors.Is(err, ErrBadLSN) {
			t.Errorf("ParseLSN(%q) = %v, want ErrBadLSN", in, err)
		}
	}
	if s := LSN(0x16B374D848).String(); s != "16/B374D848" {
		t.Errorf("String = %s", s)
	}
}

func FuzzParseLSN(f *testing.F) {
	for _, s := range []string{"0/0", "16/B374D848", "FFFFFFFF/FFFFFFFF", "1/", "a/b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLSN(s)
		if err != nil {
			return
		}
		// What parses prints back to the same value, in PostgreSQL's
		// form, which parses again.
		back, err := ParseLSN(l.String())
		if err != nil || back != l {
			t.Fatalf("ParseLSN(%q) = %v; its String %q parses to %v, %v", s, l, l.String(), back, err)
		}
		if !strings.EqualFold(strings.TrimLeft(s[:strings.IndexByte(s, '/')], "0"), strings.TrimLeft(l.String()[:strings.IndexByte(l.String(), '/')], "0")) {
			t.Fatalf("ParseLSN(%q) = %v: high half differs", s, l)
		}
	})
}

func TestWithMinLSN(t *testing.T) {
	ctx := context.Background()
	if MinLSN(ctx) != 0 {
		t.Fatal("MinLSN of a bare context")
	}
	ctx = WithMinLSN(ctx, 10)
	if MinLSN(WithMinLSN(ctx, 5)) != 10 || MinLSN(WithMinLSN(ctx, 20)) != 20 {
		t.Error("WithMinLSN does not keep the larger position")
	}
}

func TestCheckRead(t *testing.T) {
	for _, sql := range []string{"SELECT 1", "select 1", "  \n\tWITH x AS (SELECT 1) SELECT * FROM x", "(SELECT 1) UNION (SELECT 2)",
		"-- c\nSELECT 1", "/* a /* nested */ b */ VALUES (1)", "TABLE t", "show server_version", "SELECT ';';", "SELECT $$;$$"} {
		if err := checkRead(sql); err != nil {
			t.Errorf("checkRead(%q) = %v", sql, err)
		}
	}
	for _, tc := range []struct{ sql, says string }{
		{"", "no statement"}, {"  ", "no statement"}, {"INSERT INTO t VALUES (1)", "send writes with Exec or ExecLSN"},
		{"update t set x = 1", `starts with "update"`}, {"DELETE FROM t", "DELETE"}, {"CALL p()", "CALL"},
		{"/* unclosed SELECT 1", "not closed"}, {"-- SELECT 1", "no statement"}, {"/* SELECT */ DROP TABLE t", "DROP"},
		{"SELECTED", "SELECTED"}, {"COPY t TO STDOUT", "COPY"}, {"1", `"1"`},
		{"SELECT 1; INSERT INTO t VALUES (1)", "several statements"}, {"SELECT ';'; DELETE FROM t", "send each read on its own"},
		{"WITH x AS (DELETE FROM t RETURNING 1) SELECT 1", "WITH query holds a DELETE"},
	} {
		err := checkRead(tc.sql)
		if !errors.Is(err, ErrNotRead) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("checkRead(%q) = %v, want ErrNotRead saying %q", tc.sql, err, tc.says)
		}
	}
}
