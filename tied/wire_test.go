package tied

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestVerifyClaim(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 123)
	id := "AAAAAAAAAAAAAAAAAAAAAA"
	good := Claim{ID: id, Ticket: 42, Sent: t0}.Sign(testSecret)
	for _, c := range []struct {
		name string
		msg  string
		now  time.Time
		ok   bool
	}{
		{"good", good, t0, true},
		{"good, 9s later", good, t0.Add(9 * time.Second), true},
		{"11s later", good, t0.Add(11 * time.Second), false},
		{"11s earlier", good, t0.Add(-11 * time.Second), false},
		{"truncated", good[:len(good)-1], t0, false},
		{"version", "v1" + good[2:], t0, false},
		{"leading zero ticket", strings.Replace(good, ".42.", ".042.", 1), t0, false},
		{"extra field", good + ".x", t0, false},
		{"leading zero time", strings.Replace(good, ".1700", ".01700", 1), t0, false},
		{"empty", "", t0, false},
	} {
		got, err := VerifyClaim(c.msg, testSecret, c.now, 10*time.Second)
		if c.ok != (err == nil) {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if err != nil && !errors.Is(err, ErrBadMessage) {
			t.Errorf("%s: %v does not match ErrBadMessage", c.name, err)
		}
		if err == nil && (got.ID != id || got.Ticket != 42 || !got.Sent.Equal(t0)) {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

func TestParseTie(t *testing.T) {
	id := NewID()
	for _, c := range []struct {
		id, sib string
		want    Tie
		ok      bool
	}{
		{"", "", Tie{}, true},
		{id, "HTTP://Host:1/", Tie{ID: id, Sibling: "http://host:1"}, true},
		{id, "HTTP://Host:1/Svc/B/", Tie{ID: id, Sibling: "http://host:1/Svc/B"}, true},
		{id, "Host:9090", Tie{ID: id, Sibling: "host:9090"}, true},
		{id, "https://User:Pw@Host/P?Q=1", Tie{ID: id, Sibling: "https://User:Pw@host/P?Q=1"}, true},
		{id, "[FE80::1]:9090/X", Tie{ID: id, Sibling: "[fe80::1]:9090/X"}, true},
		{id, "", Tie{}, false},
		{"", "http://h", Tie{}, false},
		{"short", "http://h", Tie{}, false},
		{strings.Repeat("a", 65), "http://h", Tie{}, false},
		{id[:20] + "!!", "http://h", Tie{}, false},
		{id, "http://h x", Tie{}, false},
	} {
		got, err := ParseTie(c.id, c.sib)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("ParseTie(%q, %q) = %+v, %v", c.id, c.sib, got, err)
		}
		if err != nil && !errors.Is(err, ErrBadTie) {
			t.Errorf("ParseTie(%q, %q): %v does not match ErrBadTie", c.id, c.sib, err)
		}
	}
}
