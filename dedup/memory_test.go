package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge/dedup"
	"github.com/tailcut/hedge/internal/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) dedup.Store { return dedup.NewMemoryStore(dedup.MemoryOptions{}) })
}

func TestMemoryStoreLeaseAndTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := dedup.NewMemoryStore(dedup.MemoryOptions{})
		fp := dedup.FingerprintOf([]byte("a"))
		c, err := s.Claim(ctx, "k", fp, time.Second)
		if err != nil || !c.Won {
			t.Fatal(c, err)
		}
		time.Sleep(time.Second - time.Nanosecond)
		if c2, _ := s.Claim(ctx, "k", fp, time.Second); c2.Won {
			t.Fatal("claimed before the lease ended")
		}
		time.Sleep(time.Nanosecond)
		c2, err := s.Claim(ctx, "k", fp, time.Second)
		if err != nil || !c2.Won {
			t.Fatalf("claim at the end of the lease = %+v, %v", c2, err)
		}
		if err := s.Complete(ctx, c, dedup.Outcome{Status: 200}, time.Hour); !errors.Is(err, dedup.ErrLostClaim) {
			t.Fatalf("late holder's Complete = %v", err)
		}
		if err := s.Complete(ctx, c2, dedup.Outcome{Status: 201}, time.Minute); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute - time.Nanosecond)
		if rec, err := s.Get(ctx, "k"); err != nil || rec.Outcome.Status != 201 {
			t.Fatalf("before the TTL: %+v, %v", rec, err)
		}
		time.Sleep(time.Nanosecond)
		if _, err := s.Get(ctx, "k"); !errors.Is(err, dedup.ErrNotFound) {
			t.Fatalf("after the TTL: %v", err)
		}
		if n, _ := s.Len(); n != 0 {
			t.Fatalf("an expired record was kept after it was met: %d records", n)
		}
	})
}

func TestMemoryStoreBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := dedup.NewMemoryStore(dedup.MemoryOptions{MaxEntries: 3})
		fp := dedup.FingerprintOf([]byte("a"))
		claim := func(k string, lease time.Duration) (dedup.Claim, error) {
			return s.Claim(ctx, k, fp, lease)
		}
		// Three pending claims fill the store: a fourth is refused.
		var cs []dedup.Claim
		for i := range 3 {
			c, err := claim(fmt.Sprint(i), time.Minute)
			if err != nil || !c.Won {
				t.Fatal(c, err)
			}
			cs = append(cs, c)
		}
		if _, err := claim("3", time.Minute); !errors.Is(err, dedup.ErrFull) {
			t.Fatalf("claim in a store full of pending claims = %v, want ErrFull", err)
		}
		// A completed record is evicted, oldest first.
		if err := s.Complete(ctx, cs[1], dedup.Outcome{Status: 200}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, cs[2], dedup.Outcome{Status: 200}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if c, err := claim("3", time.Minute); err != nil || !c.Won {
			t.Fatal(c, err)
		}
		if _, err := s.Get(ctx, "1"); !errors.Is(err, dedup.ErrNotFound) {
			t.Fatalf("the oldest completed record was not evicted: %v", err)
		}
		if _, err := s.Get(ctx, "2"); err != nil {
			t.Fatalf("a younger record was evicted: %v", err)
		}
		// An expired record goes before a live completed one.
		time.Sleep(time.Minute) // claims 0 and 3 expire
		if c, err := claim("4", time.Minute); err != nil || !c.Won {
			t.Fatal(c, err)
		}
		if _, err := s.Get(ctx, "2"); err != nil {
			t.Fatalf("a live record was evicted before an expired one: %v", err)
		}

		// The byte bound.
		b := dedup.NewMemoryStore(dedup.MemoryOptions{MaxBytes: 4096})
		c, _ := b.Claim(ctx, "big", fp, time.Minute)
		if err := b.Complete(ctx, c, dedup.Outcome{Status: 200, Body: make([]byte, 8192)}, time.Hour); !errors.Is(err, dedup.ErrFull) {
			t.Fatalf("an outcome over MaxBytes = %v, want ErrFull", err)
		}
		if rec, err := b.Get(ctx, "big"); err != nil || rec.Done {
			t.Fatalf("a refused outcome lost the claim: %+v, %v", rec, err)
		}
		if err := b.Complete(ctx, c, dedup.Outcome{Status: 200, Body: make([]byte, 2048)}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, n := b.Len(); n > 4096 {
			t.Fatalf("%d bytes kept, bound 4096", n)
		}
	})
}

func TestMemoryStoreCancelledContext(t *testing.T) {
	s := dedup.NewMemoryStore(dedup.MemoryOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestMemoryStoreEvictsByExpiry: the record evicted first is the one that
// expired first, as a renewal left it: a renewed claim holds while one
// with a shorter lease, made after it, has expired and goes.
func TestMemoryStoreEvictsByExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := dedup.NewMemoryStore(dedup.MemoryOptions{MaxEntries: 2})
		fp := dedup.FingerprintOf([]byte("a"))
		a, err := s.Claim(ctx, "a", fp, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, "b", fp, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.Renew(ctx, a, 2*time.Hour); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour) // b's lease ends; a's renewed one holds
		if c, err := s.Claim(ctx, "c", fp, time.Hour); err != nil || !c.Won {
			t.Fatalf("claim in a store whose one expired record could go: %+v, %v", c, err)
		}
		if rec, err := s.Get(ctx, "a"); err != nil || rec.Token != a.Token {
			t.Fatalf("the renewed claim was evicted: %+v, %v", rec, err)
		}
		if n, _ := s.Len(); n != 2 {
			t.Fatalf("%d records, want 2", n)
		}
	})
}
