package fleet_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tailcut/hedge/fleet"
)

// FuzzParse checks that Parse never panics, that every error it returns
// matches ErrInvalidDocument, and that a document it accepts reads back
// the same from its Marshal.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte(`{"service": "a", "version": 1, "hedgers": {"*": {"mode": "on", "ops": {"get": {"rollout": 0.5}}}}}`))
	f.Add([]byte("service: a\nversion: 2\nhedgers:\n  api:\n    budget: {ratio: 0.05, burst: 3}\n    maxHedgesPerSecond: 10\n"))
	f.Add([]byte("service: a\nversion: 1\nkill: {until: 2026-12-07T16:30:00Z}\n---\nservice: b\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := fleet.Parse(data)
		if err != nil {
			if !errors.Is(err, fleet.ErrInvalidDocument) {
				t.Fatalf("Parse error %v does not match ErrInvalidDocument", err)
			}
			return
		}
		js, err := p.Marshal()
		if err != nil {
			t.Fatalf("Marshal of an accepted document: %v", err)
		}
		q, err := fleet.Parse(js)
		if err != nil {
			t.Fatalf("Parse of Marshal's output: %v\n%s", err, js)
		}
		js2, err := q.Marshal()
		if err != nil || !bytes.Equal(js, js2) {
			t.Fatalf("a document changes when read back:\n%s\n%s", js, js2)
		}
	})
}
