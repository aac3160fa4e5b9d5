package dedupredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge/dedup"
	"github.com/tailcut/hedge/dedup/dedupredis"
	"github.com/tailcut/hedge/dedup/storetest"
	"github.com/tailcut/hedge/internal/redistest"
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
