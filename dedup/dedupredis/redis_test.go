package dedupredis_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge/dedup"
	"github.com/tailcut/hedge/dedup/dedupredis"
	"github.com/tailcut/hedge/internal/redistest"
	"github.com/tailcut/hedge/internal/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	rdb := client(t, srv.Addr)
	storetest.Run(t, func(t *testing.T) dedup.Store {
		if err := rdb.FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		return dedupredis.New(rdb, dedupredis.Options{})
	})
}

func TestCommitFenced(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	rdb := client(t, srv.Addr)
	s := dedupredis.New(rdb, dedupredis.Options{})
	ctx := t.Context()
	fp := dedup.FingerprintOf()
	write := func(line string) func(context.Context, redis.Pipeliner) (dedup.Outcome, error) {
		return func(ctx context.Context, pipe redis.Pipeliner) (dedup.Outcome, error) {
			pipe.RPush(ctx, "lines", line)
			return dedup.Outcome{Status: 201, Body: []byte(line)}, nil
		}
	}
	c, _ := s.Claim(ctx, "k", fp, 20*time.Millisecond)
	c2 := storetest.ClaimWhenFree(t, s, "k", fp, time.Hour)

	if _, err := s.Commit(ctx, c, time.Hour, write("late")); !errors.Is(err, dedup.ErrLostClaim) {
		t.Fatalf("late holder: %v", err)
	}
	if out, err := s.Commit(ctx, c2, time.Hour, write("b")); err != nil || string(out.Body) != "b" {
		t.Fatal(out, err)
	}
	if out, err := s.Commit(ctx, c2, time.Hour, write("again")); err != nil || string(out.Body) != "b" {
		t.Fatal(out, err)
	}
	if n, _ := rdb.LLen(ctx, "lines").Result(); n != 1 {
		t.Fatalf("%d lines, want 1", n)
	}
	if err := s.Complete(ctx, c2, dedup.Outcome{Status: 500}, time.Hour); err != nil {
		t.Fatalf("the middleware's Complete after Commit: %v", err)
	}
	if ttl := rdb.PTTL(ctx, dedupredis.DefaultPrefix+"k").Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("outcome TTL %v", ttl)
	}
}

func TestStoreDown(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	rdb := client(t, srv.Addr)
	s := dedupredis.New(rdb, dedupredis.Options{})
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(t.Context(), "k", dedup.FingerprintOf(), time.Second); err == nil {
		t.Fatal("Claim on a stopped server succeeded")
	}
}

// TestHandlerOutlastsLease: a handler behind the middleware runs past the
// lease the claim was made with. The middleware renews the lease while
// the handler runs, so the key stays held, a copy that arrives meanwhile
// waits for the outcome, and no request runs the handler twice.
func TestHandlerOutlastsLease(t *testing.T) {
	t.Run("alone", func(t *testing.T) { outlastLease(t, false) })
	t.Run("with a second copy", func(t *testing.T) { outlastLease(t, true) })
}

func outlastLease(t *testing.T, secondCopy bool) {
	srv := redistest.Start(t, 1)[0]
	rdb := client(t, srv.Addr)
	const lease = 2 * time.Second
	var runs atomic.Int64
	entered := make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if n == 1 {
			close(entered)
			// Run until the claim's lease was renewed three times (the
			// handler has outlasted its first lease) or ended.
			cl, _ := dedup.ClaimFromContext(r.Context())
			key := dedupredis.DefaultPrefix + cl.Key
			last, renewals := time.Duration(0), 0
			for renewals < 3 {
				ttl, err := rdb.PTTL(r.Context(), key).Result()
				if err != nil || ttl < 0 {
					break // the key is gone: its lease ended
				}
				if last != 0 && ttl > last {
					renewals++
				}
				last = ttl
				time.Sleep(5 * time.Millisecond) // a polling pause, not a wait for a deadline
			}
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d", n)
	})
	h, err := dedup.New(next, dedup.Config{Store: dedupredis.New(rdb, dedupredis.Options{}), Options: dedup.Options{Lease: lease}})
	if err != nil {
		t.Fatal(err)
	}
	post := func() *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(t.Context(), "POST", "/orders", strings.NewReader("x"))
		r.Header.Set(dedup.HeaderKey, "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- post() }()
	<-entered
	if !secondCopy {
		w := <-first
		if n := runs.Load(); n != 1 || w.Code != http.StatusCreated || w.Body.String() != "run 1" {
			t.Fatalf("the handler ran %d times, want 1; the client got %d %q", n, w.Code, w.Body)
		}
		return
	}
	second := post()
	w := <-first
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1 (first: %d %q; second: %d %q)", n, w.Code, w.Body, second.Code, second.Body)
	}
	if w.Code != http.StatusCreated || w.Body.String() != "run 1" || w.Header().Get(dedup.HeaderReplayed) != "" {
		t.Fatalf("first: %d %q %v", w.Code, w.Body, w.Header())
	}
	if second.Code != http.StatusCreated || second.Body.String() != "run 1" || second.Header().Get(dedup.HeaderReplayed) != "true" {
		t.Fatalf("second: %d %q %v", second.Code, second.Body, second.Header())
	}
}
