package shardbench

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain serves when the test binary is started as a Backend's
// servers' process.
func TestMain(m *testing.M) {
	MaybeServe()
	goleak.VerifyTestMain(m)
}

// TestBackend starts the servers of each kind in a child process, reads
// every server, stalls one (a read of it cannot answer while the stall
// is on, and answers once it ends), counts what each server received,
// and checks that Close leaves no process behind.
func TestBackend(t *testing.T) {
	for _, kind := range []string{KindHTTP, KindGRPC} {
		t.Run(kind, func(t *testing.T) {
			b, err := Start(Options{Kind: kind, Shards: 3, Replicas: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if b.Name() != kind || b.Replicas() != 6 || len(b.ReplicaNames()) != 6 || b.Shards() != 3 || b.ReplicasPerShard() != 2 {
				t.Fatalf("%s backend: %d servers named %v, %d shards of %d", b.Name(), b.Replicas(), b.ReplicaNames(), b.Shards(), b.ReplicasPerShard())
			}
			read, release, err := b.NewLeafReader()
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			ctx := context.Background()
			for r := range 6 {
				if err := read(ctx, r, r); err != nil {
					t.Fatalf("server %d: %v", r, err)
				}
			}

			stallCtx, endStall := context.WithCancel(ctx)
			stalled := make(chan error, 1)
			go func() { stalled <- b.Stall(stallCtx, 0, time.Hour) }()
			// Once the stall is on, no read of server 0 can answer: wait
			// for the first that does not.
			for {
				rctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
				err := read(rctx, 0, 1)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) || err != nil && rctx.Err() != nil {
					break
				}
				if err != nil {
					t.Fatalf("server 0 before the stall: %v", err)
				}
			}
			if err := read(ctx, 1, 1); err != nil {
				t.Fatalf("server 1 while server 0 stalls: %v", err)
			}
			endStall()
			if err := <-stalled; !errors.Is(err, context.Canceled) {
				t.Errorf("Stall ended by its context: %v, want context.Canceled", err)
			}
			if err := read(ctx, 0, 1); err != nil {
				t.Fatalf("server 0 after the stall: %v", err)
			}
			served := b.Served()
			if len(served) != 6 || served[0] < 3 || slices.Min(served[1:]) < 1 || served[2] != 1 {
				t.Errorf("served %v: want server 0 at least 3, server 1 at least 2, the others 1", served)
			}
			if err := b.Stall(ctx, 6, time.Millisecond); err == nil {
				t.Error("stalling server 6 of 6: no error")
			}

			pid := b.Pids()[0]
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("the servers' process %d still exists after Close (kill 0: %v)", pid, err)
			}
		})
	}
}

// A mistake in the options is refused before any process starts.
func TestStartValidation(t *testing.T) {
	for _, o := range []Options{
		{Kind: "redis", Shards: 2, Replicas: 2},
		{Kind: KindHTTP, Shards: 0, Replicas: 2},
		{Kind: KindHTTP, Shards: 200, Replicas: 2},
	} {
		if b, err := Start(o); !errors.Is(err, ErrInvalid) {
			if err == nil {
				_ = b.Close()
			}
			t.Errorf("Start(%+v): %v, want an error matching ErrInvalid", o, err)
		}
	}
	if _, _, err := parseSpec("http:x"); err == nil {
		t.Error(`parseSpec("http:x"): no error`)
	}
}

// FuzzParseSpec: the servers' process reads its kind and count from
// ServerEnv; whatever the value, parseSpec returns a valid pair or an
// error, and a valid pair reads back the same.
func FuzzParseSpec(f *testing.F) {
	for _, v := range []string{"http:60", "grpc:1", "grpc:300", "http:301", "http:0", "tcp:3", "http", "http:-1", ":5", "http:1:2"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		kind, n, err := parseSpec(v)
		if err != nil {
			return
		}
		if kind != KindHTTP && kind != KindGRPC || n < 1 || n > MaxServers {
			t.Fatalf("parseSpec(%q) = %q, %d: out of range", v, kind, n)
		}
		if k2, n2, err := parseSpec(kind + ":" + strconv.Itoa(n)); err != nil || k2 != kind || n2 != n {
			t.Fatalf("parseSpec(%q) = %q, %d; reading it back: %q, %d, %v", v, kind, n, k2, n2, err)
		}
	})
}
