// Package storetest is the conformance suite of dedup.Store
// implementations. Every store of this module runs it against its real
// server; a store written elsewhere can run it too:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) dedup.Store { return newStore(t) })
//	}
//
// newStore must return a store that is empty (or whose keys cannot clash
// with the suite's: each subtest uses keys of its own) and that is closed
// by t.Cleanup.
//
// Time: leases and TTLs are checked with short durations and by polling
// for the awaited state, with a hang guard of one minute; the suite never
// asserts that something has not happened yet after a wall-clock wait, so
// it does not depend on the machine's speed. The one "not yet" checks use
// a lease or TTL of an hour.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailcut/hedge/dedup"
)

// hangGuard bounds every wait for a state that a correct store reaches.
const hangGuard = time.Minute

// short is the lease and TTL of the expiry tests.
const short = 50 * time.Millisecond

// long is a lease or TTL that cannot end during a test.
const long = time.Hour

// Run runs the suite, each check as a subtest with a fresh store.
func Run(t *testing.T, newStore func(t *testing.T) dedup.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s dedup.Store)
	}{
		{"ClaimThenExisting", claimThenExisting},
		{"ConcurrentClaimOneWinner", concurrentClaim},
		{"OutcomeRoundTrip", outcomeRoundTrip},
		{"CompleteTwice", completeTwice},
		{"CompleteFenced", completeFenced},
		{"Release", release},
		{"ReleaseFenced", releaseFenced},
		{"LeaseExpiry", leaseExpiry},
		{"LeaseHolds", leaseHolds},
		{"Renew", renew},
		{"RenewFenced", renewFenced},
		{"TTLExpiry", ttlExpiry},
		{"Fingerprints", fingerprints},
		{"Keys", keys},
		{"BigBody", bigBody},
		{"TooLargeMarker", tooLargeMarker},
		{"GetMissing", getMissing},
		{"CancelledContext", cancelledContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), hangGuard)
	t.Cleanup(cancel)
	return c
}

func fp(s string) dedup.Fingerprint { return dedup.FingerprintOf([]byte(s)) }

func mustClaim(t *testing.T, s dedup.Store, key string, f dedup.Fingerprint, lease time.Duration) dedup.Claim {
	t.Helper()
	c, err := s.Claim(ctx(t), key, f, lease)
	if err != nil {
		t.Fatalf("Claim(%q): %v", key, err)
	}
	if !c.Won {
		t.Fatalf("Claim(%q) of a fresh key did not win; existing record %+v", key, c.Existing)
	}
	if c.Token == "" {
		t.Fatalf("Claim(%q) won with an empty token", key)
	}
	return c
}

// waitFor polls cond until it holds, failing the test after hangGuard.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting until %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, hangGuard)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sampleOutcome() dedup.Outcome {
	return dedup.Outcome{
		Status: 201,
		Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/orders/7"}, "Vary": {"Accept", "Accept-Encoding"}},
		Body:   []byte(`{"order":7,"bytes":"\u0000\xff"}`),
	}
}

func equalOutcome(a, b dedup.Outcome) bool {
	if a.Status != b.Status || a.TooLarge != b.TooLarge || !bytes.Equal(a.Body, b.Body) || len(a.Header) != len(b.Header) {
		return false
	}
	for k, vs := range a.Header {
		ws := b.Header[k]
		if len(vs) != len(ws) {
			return false
		}
		for i := range vs {
			if vs[i] != ws[i] {
				return false
			}
		}
	}
	return true
}

func claimThenExisting(t *testing.T, s dedup.Store) {
	c := mustClaim(t, s, "k1", fp("a"), long)
	c2, err := s.Claim(ctx(t), "k1", fp("a"), long)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Won {
		t.Fatal("a second Claim of a held key won")
	}
	if c2.Existing.Done || c2.Existing.Fingerprint != fp("a") || c2.Existing.Token != c.Token || c2.Existing.Key != "k1" {
		t.Fatalf("existing record = %+v, want pending, fingerprint of the claim, token %q", c2.Existing, c.Token)
	}
	rec, err := s.Get(ctx(t), "k1")
	if err != nil || rec.Done || rec.Token != c.Token {
		t.Fatalf("Get of a pending key = %+v, %v", rec, err)
	}
}

func concurrentClaim(t *testing.T, s dedup.Store) {
	const n = 32
	for round := range 5 {
		key := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		start := make(chan struct{})
		won := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				c, err := s.Claim(ctx(t), key, fp("same"), long)
				won[i], errs[i] = c.Won, err
			}()
		}
		close(start)
		wg.Wait()
		winners := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Claim %d: %v", i, errs[i])
			}
			if won[i] {
				winners++
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d of %d concurrent Claims won, want exactly 1", round, winners, n)
		}
	}
}

func outcomeRoundTrip(t *testing.T, s dedup.Store) {
	c := mustClaim(t, s, "k2", fp("a"), long)
	want := sampleOutcome()
	if err := s.Complete(ctx(t), c, want, long); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(ctx(t), "k2")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Done || !equalOutcome(rec.Outcome, want) || rec.Fingerprint != fp("a") {
		t.Fatalf("Get = %+v, want done with %+v", rec, want)
	}
	c2, err := s.Claim(ctx(t), "k2", fp("a"), long)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Won || !c2.Existing.Done || !equalOutcome(c2.Existing.Outcome, want) {
		t.Fatalf("Claim of a completed key = %+v, want the stored outcome", c2)
	}
	// A record handed out is a copy: changing it changes nothing stored.
	rec.Outcome.Body[0] = 'X'
	rec.Outcome.Header.Set("Location", "changed")
	again, err := s.Get(ctx(t), "k2")
	if err != nil || !equalOutcome(again.Outcome, want) {
		t.Fatalf("a returned record aliases the store: %+v, %v", again, err)
	}
	// An empty outcome round-trips too.
	c3 := mustClaim(t, s, "k2-empty", fp("a"), long)
	if err := s.Complete(ctx(t), c3, dedup.Outcome{Status: 204}, long); err != nil {
		t.Fatal(err)
	}
	rec, err = s.Get(ctx(t), "k2-empty")
	if err != nil || rec.Outcome.Status != 204 || len(rec.Outcome.Body) != 0 || len(rec.Outcome.Header) != 0 {
		t.Fatalf("empty outcome = %+v, %v", rec, err)
	}
}

func completeTwice(t *testing.T, s dedup.Store) {
	c := mustClaim(t, s, "k3", fp("a"), long)
	out := sampleOutcome()
	if err := s.Complete(ctx(t), c, out, long); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx(t), c, dedup.Outcome{Status: 500}, long); err != nil {
		t.Fatalf("completing again with the same claim: %v, want nil", err)
	}
	rec, err := s.Get(ctx(t), "k3")
	if err != nil || !equalOutcome(rec.Outcome, out) {
		t.Fatalf("the second Complete replaced the outcome: %+v, %v", rec, err)
	}
}

func completeFenced(t *testing.T, s dedup.Store) {
	c := mustClaim(t, s, "k4", fp("a"), long)
	stale := c
	stale.Token = dedup.NewToken()
	err := s.Complete(ctx(t), stale, sampleOutcome(), long)
	if !errors.Is(err, dedup.ErrLostClaim) {
		t.Fatalf("Complete with another token = %v, want ErrLostClaim", err)
	}
	rec, err := s.Get(ctx(t), "k4")
	if err != nil || rec.Done {
		t.Fatalf("after a refused Complete: %+v, %v; want still pending", rec, err)
	}
	never := dedup.Claim{Key: "k4-never", Fingerprint: fp("a"), Token: dedup.NewToken(), Won: true}
	if err := s.Complete(ctx(t), never, sampleOutcome(), long); !errors.Is(err, dedup.ErrLostClaim) {
		t.Fatalf("Complete of a key never claimed = %v, want ErrLostClaim", err)
	}
	if _, err := s.Get(ctx(t), "k4-never"); !errors.Is(err, dedup.ErrNotFound) {
		t.Fatalf("a refused Complete created a record: %v", err)
	}
}

func release(t *testing.T, s dedup.Store) {
	c := mustClaim(t, s, "k5", fp("a"), long)
	if err := s.Release(ctx(t), c); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx(t), "k5"); !errors.Is(err, dedup.ErrNotFound) {
		t.Fatalf("Get after Release = %v, want ErrNotFound", err)
	}
	c2 := mustClaim(t, s, "k5", fp("b"), long)
	if c2.Token == c.Token {
		t.Fatal("a new claim reused the released claim's token")
	}
	if err := s.Complete(ctx(t), c, sampleOutcome(), long); !errors.Is(err, dedup.ErrLostClaim) {
		t.Fatalf("Complete by the released claim = %v, want ErrLostClaim", err)
	}
	// Releasing a completed claim leaves the outcome.
	if err := s.Complete(ctx(t), c2, sampleOutcome(), long); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx(t), c2); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Get(ctx(t), "k5"); err != nil || !rec.Done {
		t.Fatalf("Release removed a completed record: %+v, %v", rec, err)
	}
}

func releaseFenced(t *testing.T, s dedup.Store) {
	c := mustClaim(t, s, "k6", fp("a"), long)
	stale := c
	stale.Token = dedup.NewToken()
	if err := s.Release(ctx(t), stale); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Get(ctx(t), "k6"); err != nil || rec.Token != c.Token {
		t.Fatalf("Release with another token removed the claim: %+v, %v", rec, err)
	}
	if err := s.Release(ctx(t), dedup.Claim{Key: "k6-never", Token: dedup.NewToken()}); err != nil {
		t.Fatalf("Release of a key never claimed: %v", err)
	}
}

func leaseExpiry(t *testing.T, s dedup.Store) {
	c := mustClaim(t, s, "k7", fp("a"), short)
	waitFor(t, "the lease ends (Get reports ErrNotFound)", func() (bool, error) {
		_, err := s.Get(ctx(t), "k7")
		if errors.Is(err, dedup.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
	c2, err := s.Claim(ctx(t), "k7", fp("a"), long)
	if err != nil || !c2.Won {
		t.Fatalf("Claim after the lease ended = %+v, %v; want won", c2, err)
	}
	if err := s.Complete(ctx(t), c, sampleOutcome(), long); !errors.Is(err, dedup.ErrLostClaim) {
		t.Fatalf("Complete by the expired holder = %v, want ErrLostClaim", err)
	}
	if err := s.Release(ctx(t), c); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx(t), c2, sampleOutcome(), long); err != nil {
		t.Fatalf("Complete by the new holder: %v", err)
	}
	// Many racing claimants of an expired lease: one wins.
	mustClaim(t, s, "k7-race", fp("a"), short)
	waitFor(t, "the lease of k7-race ends", func() (bool, error) {
		_, err := s.Get(ctx(t), "k7-race")
		if errors.Is(err, dedup.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.Claim(ctx(t), "k7-race", fp("a"), long)
			if err != nil {
				t.Error(err)
				return
			}
			if c.Won {
				mu.Lock()
				winners++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if winners != 1 {
		t.Fatalf("%d claims of an expired lease won, want 1", winners)
	}
}

func leaseHolds(t *testing.T, s dedup.Store) {
	mustClaim(t, s, "k8", fp("a"), long)
	for range 3 {
		c, err := s.Claim(ctx(t), "k8", fp("a"), long)
		if err != nil || c.Won {
			t.Fatalf("Claim under a live lease = %+v, %v", c, err)
		}
	}
}

// renew: a claim made with a short lease and renewed for a long one
// holds after the short lease would have ended.
func renew(t *testing.T, s dedup.Store) {
	start := time.Now()
	c := mustClaim(t, s, "k-renew", fp("a"), short)
	if err := s.Renew(ctx(t), c, long); err != nil {
		t.Fatalf("Renew of a held claim: %v", err)
	}
	waitFor(t, "the short lease would have ended", func() (bool, error) { return time.Since(start) > 2*short, nil })
	c2, err := s.Claim(ctx(t), "k-renew", fp("a"), long)
	if err != nil || c2.Won || c2.Existing.Token != c.Token {
		t.Fatalf("Claim after the renewed claim's first lease = %+v, %v; want the renewed claim to hold", c2, err)
	}
	if err := s.Complete(ctx(t), c, sampleOutcome(), long); err != nil {
		t.Fatalf("Complete of the renewed claim: %v", err)
	}
}

// renewFenced: Renew refuses a claim that was taken over, released or
// completed, and touches neither the new holder's claim nor an outcome's
// TTL.
func renewFenced(t *testing.T, s dedup.Store) {
	old := mustClaim(t, s, "k-renew2", fp("a"), short)
	c := ClaimWhenFree(t, s, "k-renew2", fp("a"), long)
	if err := s.Renew(ctx(t), old, long); !errors.Is(err, dedup.ErrLostClaim) {
		t.Fatalf("Renew by the holder whose lease was taken over = %v, want ErrLostClaim", err)
	}
	if rec, err := s.Get(ctx(t), "k-renew2"); err != nil || rec.Token != c.Token {
		t.Fatalf("after a refused Renew: %+v, %v", rec, err)
	}
	if err := s.Renew(ctx(t), dedup.Claim{Key: "k-renew2", Fingerprint: fp("a"), Won: true, Token: dedup.NewToken()}, long); !errors.Is(err, dedup.ErrLostClaim) {
		t.Fatalf("Renew with another token = %v, want ErrLostClaim", err)
	}
	if err := s.Complete(ctx(t), c, sampleOutcome(), long); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx(t), c, short); !errors.Is(err, dedup.ErrLostClaim) {
		t.Fatalf("Renew of a completed claim = %v, want ErrLostClaim", err)
	}
	start := time.Now()
	waitFor(t, "the short lease would have ended", func() (bool, error) { return time.Since(start) > 2*short, nil })
	if rec, err := s.Get(ctx(t), "k-renew2"); err != nil || !rec.Done {
		t.Fatalf("a Renew of a completed record shortened its TTL: %+v, %v", rec, err)
	}
	r := mustClaim(t, s, "k-renew3", fp("a"), long)
	if err := s.Release(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx(t), r, long); !errors.Is(err, dedup.ErrLostClaim) {
		t.Fatalf("Renew of a released claim = %v, want ErrLostClaim", err)
	}
	if _, err := s.Get(ctx(t), "k-renew3"); !errors.Is(err, dedup.ErrNotFound) {
		t.Fatalf("Renew of a released claim brought it back: %v", err)
	}
}

func ttlExpiry(t *testing.T, s dedup.Store) {
	c := mustClaim(t, s, "k9", fp("a"), long)
	if err := s.Complete(ctx(t), c, sampleOutcome(), short); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the outcome's TTL ends", func() (bool, error) {
		_, err := s.Get(ctx(t), "k9")
		if errors.Is(err, dedup.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
	c2 := mustClaim(t, s, "k9", fp("b"), long)
	if err := s.Complete(ctx(t), c2, dedup.Outcome{Status: 200}, long); err != nil {
		t.Fatal(err)
	}
	// A long TTL keeps the outcome.
	c3 := mustClaim(t, s, "k9-long", fp("a"), short)
	if err := s.Complete(ctx(t), c3, sampleOutcome(), long); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * short) // longer than the lease; the TTL replaced it
	if rec, err := s.Get(ctx(t), "k9-long"); err != nil || !rec.Done {
		t.Fatalf("a completed record expired with its claim's lease: %+v, %v", rec, err)
	}
}

func fingerprints(t *testing.T, s dedup.Store) {
	a := dedup.FingerprintOf([]byte("POST"), []byte("/orders"), nil, []byte(`{"n":1}`))
	b := dedup.FingerprintOf([]byte("POST"), []byte("/orders"), nil, []byte(`{"n":2}`))
	if a == b {
		t.Fatal("different bodies have the same fingerprint")
	}
	if dedup.FingerprintOf([]byte("ab"), []byte("c")) == dedup.FingerprintOf([]byte("a"), []byte("bc")) {
		t.Fatal("FingerprintOf does not separate its parts")
	}
	mustClaim(t, s, "k10", a, long)
	c, err := s.Claim(ctx(t), "k10", b, long)
	if err != nil || c.Won || c.Existing.Fingerprint != a {
		t.Fatalf("Claim with another fingerprint = %+v, %v; want not won, the first fingerprint", c, err)
	}
	var zero dedup.Fingerprint
	allOnes := dedup.Fingerprint{}
	for i := range allOnes {
		allOnes[i] = 0xff
	}
	for i, f := range []dedup.Fingerprint{zero, allOnes} {
		key := fmt.Sprintf("k10-%d", i)
		c := mustClaim(t, s, key, f, long)
		if err := s.Complete(ctx(t), c, dedup.Outcome{Status: 200}, long); err != nil {
			t.Fatal(err)
		}
		rec, err := s.Get(ctx(t), key)
		if err != nil || rec.Fingerprint != f {
			t.Fatalf("fingerprint %x round trip = %x, %v", f, rec.Fingerprint, err)
		}
	}
}

func keys(t *testing.T, s dedup.Store) {
	ks := []string{
		"a", "A", "a ", " a", "01890a5d-ac96-774b-bcce-b302099a8057",
		strings.Repeat("k", dedup.DefaultMaxKeyLen), `quote"back\slash`, "2:ab:c", "per%cent_under_score*",
	}
	claims := map[string]dedup.Claim{}
	for _, k := range ks {
		claims[k] = mustClaim(t, s, k, fp(k), long)
	}
	for _, k := range ks {
		if err := s.Complete(ctx(t), claims[k], dedup.Outcome{Status: 200, Body: []byte(k)}, long); err != nil {
			t.Fatalf("Complete(%q): %v", k, err)
		}
	}
	for _, k := range ks {
		rec, err := s.Get(ctx(t), k)
		if err != nil || string(rec.Outcome.Body) != k || rec.Key != k {
			t.Fatalf("key %q: Get = %+v, %v", k, rec, err)
		}
	}
}

func bigBody(t *testing.T, s dedup.Store) {
	body := make([]byte, 1<<20)
	for i := range body {
		body[i] = byte(i*7 + i>>8)
	}
	c := mustClaim(t, s, "k11", fp("a"), long)
	out := dedup.Outcome{Status: 200, Body: body}
	if err := s.Complete(ctx(t), c, out, long); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(ctx(t), "k11")
	if err != nil || !bytes.Equal(rec.Outcome.Body, body) {
		t.Fatalf("a 1 MiB body did not round-trip: %d bytes, %v", len(rec.Outcome.Body), err)
	}
}

func tooLargeMarker(t *testing.T, s dedup.Store) {
	c := mustClaim(t, s, "k12", fp("a"), long)
	out := dedup.Outcome{Status: 200, Header: http.Header{"Content-Type": {"video/mp4"}}, TooLarge: true}
	if err := s.Complete(ctx(t), c, out, long); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(ctx(t), "k12")
	if err != nil || !rec.Outcome.TooLarge || !equalOutcome(rec.Outcome, out) {
		t.Fatalf("the too-large marker did not round-trip: %+v, %v", rec, err)
	}
}

func getMissing(t *testing.T, s dedup.Store) {
	_, err := s.Get(ctx(t), "never")
	if !errors.Is(err, dedup.ErrNotFound) {
		t.Fatalf("Get of a missing key = %v, want ErrNotFound", err)
	}
}

func cancelledContext(t *testing.T, s dedup.Store) {
	c, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Claim(c, "k13", fp("a"), long); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx(t), "k13"); !errors.Is(err, dedup.ErrNotFound) {
		t.Fatalf("a cancelled Claim left a record: %v", err)
	}
}

// ClaimWhenFree claims key for fp with lease as soon as the record there,
// if any, has let go: for a test that waits out another claim's lease on a
// store whose clock is the server's (PostgreSQL, Redis) or the file's
// users' (SQLite), which no fake clock reaches. It polls; the outcome does
// not depend on how fast, only the time the test takes does.
func ClaimWhenFree(t *testing.T, s dedup.Store, key string, f dedup.Fingerprint, lease time.Duration) dedup.Claim {
	t.Helper()
	var c dedup.Claim
	waitFor(t, "the lease of "+key+" ended", func() (bool, error) {
		var err error
		c, err = s.Claim(t.Context(), key, f, lease)
		return c.Won, err
	})
	return c
}
