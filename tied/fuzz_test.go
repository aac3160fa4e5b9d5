package tied

import (
	"errors"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary tie headers and claims to the
// parsers: they never panic, errors match their sentinels, and what they
// accept round-trips.
func FuzzParse(f *testing.F) {
	t0 := time.Unix(1_700_000_000, 0)
	f.Add(NewID(), "http://10.0.0.2:8080", Claim{ID: "AAAAAAAAAAAAAAAAAAAAAA", Ticket: 1 << 63, Sent: t0}.Sign(testSecret))
	f.Add("", "", "")
	f.Add("short", "x y", "v1.a.b.c")
	f.Add("AAAAAAAAAAAAAAAAAAAAAA", "HOST:1/", "v2.AAAAAAAAAAAAAAAAAAAAAA.-1.-5.AAAA")
	f.Fuzz(func(t *testing.T, id, sibling, msg string) {
		tie, err := ParseTie(id, sibling)
		switch {
		case err != nil && !errors.Is(err, ErrBadTie):
			t.Fatalf("ParseTie error %v does not match ErrBadTie", err)
		case err == nil && tie.Tied():
			again, err := ParseTie(tie.ID, tie.Sibling)
			if err != nil || again != tie {
				t.Fatalf("ParseTie(%q, %q) = %+v, reparsed %+v, %v", id, sibling, tie, again, err)
			}
		}
		c, err := VerifyClaim(msg, testSecret, t0, time.Hour)
		switch {
		case err != nil && !errors.Is(err, ErrBadMessage):
			t.Fatalf("VerifyClaim error %v does not match ErrBadMessage", err)
		case err == nil && c.Sign(testSecret) != msg:
			t.Fatalf("VerifyClaim accepted %q, which signs as %q", msg, c.Sign(testSecret))
		}
		// A message built from the input, properly signed, verifies.
		if checkID(id) == nil {
			m := Claim{ID: id, Ticket: uint64(len(msg)), Sent: t0}.Sign(testSecret)
			if got, err := VerifyClaim(m, testSecret, t0, time.Second); err != nil || got.ID != id {
				t.Fatalf("signed message %q: %+v, %v", m, got, err)
			}
		}
	})
}
