package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge/dedup"
)

// orders is a non-idempotent handler: each run appends an order line.
type orders struct {
	runs  atomic.Int64
	block chan struct{} // when set, each run waits for it to be closed
}

func (o *orders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := o.runs.Add(1)
	if o.block != nil {
		select {
		case <-o.block:
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
			return
		}
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Location", fmt.Sprintf("/orders/%d", n))
	w.Header().Set("Set-Cookie", "session=secret")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "order %d: %s", n, body)
}

func newMiddleware(t *testing.T, next http.Handler, cfg dedup.Config) *dedup.Handler {
	t.Helper()
	h, err := dedup.New(next, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func request(ctx context.Context, method, target, key, body string) *http.Request {
	r := httptest.NewRequestWithContext(ctx, method, target, strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestMiddlewareRunsOnceAndReplays(t *testing.T) {
	o := &orders{}
	h := newMiddleware(t, o, dedup.Config{})
	first := serve(h, request(t.Context(), "POST", "/orders", "k-1", "one widget"))
	if first.Code != http.StatusCreated || first.Body.String() != "order 1: one widget" || first.Header().Get(dedup.HeaderReplayed) != "" {
		t.Fatalf("first: %d %q %v", first.Code, first.Body, first.Header())
	}
	if first.Header().Get("Set-Cookie") == "" {
		t.Fatal("the first response lost its own headers")
	}
	for range 3 {
		again := serve(h, request(t.Context(), "POST", "/orders", "k-1", "one widget"))
		if again.Code != http.StatusCreated || again.Body.String() != "order 1: one widget" {
			t.Fatalf("replay: %d %q", again.Code, again.Body)
		}
		if again.Header().Get(dedup.HeaderReplayed) != "true" || again.Header().Get("Location") != "/orders/1" || again.Header().Get("Content-Type") != "text/plain" {
			t.Fatalf("replay headers: %v", again.Header())
		}
		if again.Header().Get("Set-Cookie") != "" {
			t.Fatal("Set-Cookie was replayed")
		}
	}
	// The X- header names the same key; a quoted key is the same key.
	r := request(t.Context(), "POST", "/orders", "", "one widget")
	r.Header.Set("X-Idempotency-Key", "k-1")
	if w := serve(h, r); w.Header().Get(dedup.HeaderReplayed) != "true" {
		t.Fatalf("X-Idempotency-Key: %d %v", w.Code, w.Header())
	}
	if w := serve(h, request(t.Context(), "POST", "/orders", `"k-1"`, "one widget")); w.Header().Get(dedup.HeaderReplayed) != "true" {
		t.Fatalf("quoted key: %d %v", w.Code, w.Header())
	}
	// Without a key, every request runs.
	serve(h, request(t.Context(), "POST", "/orders", "", "x"))
	serve(h, request(t.Context(), "POST", "/orders", "", "x"))
	if n := o.runs.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want 3 (one keyed, two unkeyed)", n)
	}
}

func TestMiddlewareRefusals(t *testing.T) {
	o := &orders{}
	h := newMiddleware(t, o, dedup.Config{MaxRequestBody: 64})
	serve(h, request(t.Context(), "POST", "/orders", "k", "a"))
	tests := []struct {
		name   string
		req    func() *http.Request
		status int
		msg    string
	}{
		{"other body", func() *http.Request { return request(t.Context(), "POST", "/orders", "k", "b") }, 422, "different request"},
		{"other path", func() *http.Request { return request(t.Context(), "POST", "/refunds", "k", "a") }, 422, "different request"},
		{"other query", func() *http.Request { return request(t.Context(), "POST", "/orders?x=1", "k", "a") }, 422, "different request"},
		{"other method", func() *http.Request { return request(t.Context(), "PUT", "/orders", "k", "a") }, 422, "different request"},
		{"long key", func() *http.Request { return request(t.Context(), "POST", "/orders", strings.Repeat("x", 256), "a") }, 400, "256 bytes long"},
		{"control character", func() *http.Request { return request(t.Context(), "POST", "/orders", "k\x01", "a") }, 400, "printable ASCII"},
		{"non-ASCII", func() *http.Request { return request(t.Context(), "POST", "/orders", "clé", "a") }, 400, "printable ASCII"},
		{"bad quoting", func() *http.Request { return request(t.Context(), "POST", "/orders", `"k`, "a") }, 400, "closing quote"},
		{"empty", func() *http.Request {
			r := request(t.Context(), "POST", "/orders", "", "a")
			r.Header["Idempotency-Key"] = []string{""}
			return r
		}, 400, "empty"},
		{"two keys", func() *http.Request {
			r := request(t.Context(), "POST", "/orders", "k", "a")
			r.Header.Set("X-Idempotency-Key", "other")
			return r
		}, 400, "two different keys"},
		{"body too large", func() *http.Request { return request(t.Context(), "POST", "/orders", "k2", strings.Repeat("b", 65)) }, 413, "too large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(h, tc.req())
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.msg) {
				t.Fatalf("got %d %q, want %d containing %q", w.Code, w.Body, tc.status, tc.msg)
			}
		})
	}
	if n := o.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestMiddlewareConcurrentCopiesWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &orders{block: make(chan struct{})}
		h := newMiddleware(t, o, dedup.Config{})
		const copies = 8
		res := make([]*httptest.ResponseRecorder, copies)
		var wg sync.WaitGroup
		for i := range copies {
			wg.Go(func() { res[i] = serve(h, request(t.Context(), "POST", "/orders", "k", "x")) })
		}
		synctest.Wait() // one copy runs the handler; the others wait for it
		if n := o.runs.Load(); n != 1 {
			t.Fatalf("handler started %d times, want 1", n)
		}
		close(o.block)
		wg.Wait()
		replays := 0
		for _, w := range res {
			if w.Code != 201 || w.Body.String() != "order 1: x" {
				t.Fatalf("a copy got %d %q", w.Code, w.Body)
			}
			if w.Header().Get(dedup.HeaderReplayed) == "true" {
				replays++
			}
		}
		if replays != copies-1 {
			t.Fatalf("%d replays, want %d", replays, copies-1)
		}
	})
}

func TestMiddlewareWaitBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &orders{block: make(chan struct{})}
		h := newMiddleware(t, o, dedup.Config{})
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- serve(h, request(t.Context(), "POST", "/orders", "k", "x")) }()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		w := serve(h, request(ctx, "POST", "/orders", "k", "x"))
		if w.Code != http.StatusConflict || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "still in progress") {
			t.Fatalf("a copy whose deadline passed while waiting: %d %q", w.Code, w.Body)
		}
		close(o.block)
		if first := <-done; first.Code != 201 {
			t.Fatalf("first: %d", first.Code)
		}
	})
}

// noRenew is a MemoryStore that refuses to renew leases, as a store does
// that the holder of a claim cannot reach.
type noRenew struct{ *dedup.MemoryStore }

func (noRenew) Renew(context.Context, dedup.Claim, time.Duration) error { return errDown }

// TestMiddlewareLeaseTakeover: the holder stalls past its lease, which it
// cannot renew; the waiting copy takes over and runs; when the stalled
// holder wakes, its outcome is refused and its client gets the committed
// one, without the handler running a third time.
func TestMiddlewareLeaseTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stall := make(chan struct{})
		var runs atomic.Int64
		next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := runs.Add(1)
			if n == 1 {
				<-stall
			}
			fmt.Fprintf(w, "run %d", n)
		})
		h := newMiddleware(t, next, dedup.Config{Store: noRenew{dedup.NewMemoryStore(dedup.MemoryOptions{})}, Options: dedup.Options{Lease: time.Second}})
		first := make(chan *httptest.ResponseRecorder)
		go func() { first <- serve(h, request(t.Context(), "POST", "/x", "k", "")) }()
		synctest.Wait()
		second := serve(h, request(t.Context(), "POST", "/x", "k", "")) // waits a second, then takes over
		if second.Body.String() != "run 2" || second.Header().Get(dedup.HeaderReplayed) != "" {
			t.Fatalf("second copy: %d %q %v", second.Code, second.Body, second.Header())
		}
		close(stall)
		w := <-first
		if w.Body.String() != "run 2" || w.Header().Get(dedup.HeaderReplayed) != "true" {
			t.Fatalf("the stalled holder's client got %q (replayed %q), want the committed outcome", w.Body, w.Header().Get(dedup.HeaderReplayed))
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("the handler ran %d times, want 2", n)
		}
	})
}

// failing is a MemoryStore whose calls fail while down is set, to test
// how the middleware treats a store that is unreachable.
type failing struct {
	*dedup.MemoryStore
	down atomic.Bool
}

var errDown = errors.New("connection refused")

func (f *failing) Claim(ctx context.Context, key string, fp dedup.Fingerprint, lease time.Duration) (dedup.Claim, error) {
	if f.down.Load() {
		return dedup.Claim{}, errDown
	}
	return f.MemoryStore.Claim(ctx, key, fp, lease)
}

func (f *failing) Complete(ctx context.Context, c dedup.Claim, out dedup.Outcome, ttl time.Duration) error {
	if f.down.Load() {
		return errDown
	}
	return f.MemoryStore.Complete(ctx, c, out, ttl)
}

func TestMiddlewareStoreDownFailsClosed(t *testing.T) {
	o := &orders{}
	s := &failing{MemoryStore: dedup.NewMemoryStore(dedup.MemoryOptions{})}
	h := newMiddleware(t, o, dedup.Config{Store: s})
	s.down.Store(true)
	w := serve(h, request(t.Context(), "POST", "/orders", "k", "x"))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "connection refused") || w.Header().Get("Retry-After") == "" {
		t.Fatalf("store down: %d %q", w.Code, w.Body)
	}
	if o.runs.Load() != 0 {
		t.Fatal("the handler ran without a claim")
	}
	// Unkeyed requests do not need the store.
	if w := serve(h, request(t.Context(), "POST", "/orders", "", "x")); w.Code != 201 {
		t.Fatalf("unkeyed request with the store down: %d", w.Code)
	}
}

func TestMiddlewareBigResponse(t *testing.T) {
	big := strings.Repeat("z", 100)
	var runs atomic.Int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		io.WriteString(w, big[:50])
		w.(http.Flusher).Flush()
		io.WriteString(w, big[50:])
	})
	h := newMiddleware(t, next, dedup.Config{MaxStoredBody: 64})
	first := serve(h, request(t.Context(), "POST", "/x", "k", ""))
	if first.Code != 200 || first.Body.String() != big {
		t.Fatalf("first: %d, %d bytes", first.Code, first.Body.Len())
	}
	again := serve(h, request(t.Context(), "POST", "/x", "k", ""))
	if again.Code != http.StatusConflict || !strings.Contains(again.Body.String(), "too large") || again.Header().Get(dedup.HeaderReplayed) != "true" {
		t.Fatalf("replay of a too-large outcome: %d %q", again.Code, again.Body)
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times", runs.Load())
	}
}

func TestMiddlewarePanicReleases(t *testing.T) {
	var runs atomic.Int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			panic("boom")
		}
		io.WriteString(w, "ok")
	})
	h := newMiddleware(t, next, dedup.Config{})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not reach the caller")
			}
		}()
		serve(h, request(t.Context(), "POST", "/x", "k", ""))
	}()
	if w := serve(h, request(t.Context(), "POST", "/x", "k", "")); w.Body.String() != "ok" || w.Header().Get(dedup.HeaderReplayed) != "" {
		t.Fatalf("after a panic: %d %q", w.Code, w.Body)
	}
}

func TestMiddlewareServerErrorReleases(t *testing.T) {
	var runs atomic.Int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			http.Error(w, "db down", 500)
			return
		}
		io.WriteString(w, "ok")
	})
	h := newMiddleware(t, next, dedup.Config{})
	if w := serve(h, request(t.Context(), "POST", "/x", "k", "")); w.Code != 500 {
		t.Fatal(w.Code)
	}
	if w := serve(h, request(t.Context(), "POST", "/x", "k", "")); w.Code != 200 {
		t.Fatalf("retry after a 500: %d", w.Code)
	}
	if w := serve(h, request(t.Context(), "POST", "/x", "k", "")); w.Header().Get(dedup.HeaderReplayed) != "true" || runs.Load() != 2 {
		t.Fatalf("third: replayed %q, %d runs", w.Header().Get(dedup.HeaderReplayed), runs.Load())
	}
}

func TestMiddlewareScope(t *testing.T) {
	o := &orders{}
	h := newMiddleware(t, o, dedup.Config{Scope: func(r *http.Request) string { return r.Header.Get("Account") }})
	for _, acct := range []string{"alice", "bob", "alice"} {
		r := request(t.Context(), "POST", "/orders", "k", "x")
		r.Header.Set("Account", acct)
		serve(h, r)
	}
	if n := o.runs.Load(); n != 2 {
		t.Fatalf("%d runs, want one per account", n)
	}
}

func TestMiddlewareClaimInContext(t *testing.T) {
	var got dedup.Claim
	var ok bool
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok = dedup.ClaimFromContext(r.Context())
	})
	h := newMiddleware(t, next, dedup.Config{})
	serve(h, request(t.Context(), "POST", "/x", "k", ""))
	if !ok || !got.Won || !strings.HasSuffix(got.Key, ":k") || got.Token == "" {
		t.Fatalf("claim in context: %+v, %v", got, ok)
	}
	serve(h, request(t.Context(), "POST", "/x", "", ""))
	if _, ok := dedup.ClaimFromContext(t.Context()); ok {
		t.Fatal("a context without a claim reports one")
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := dedup.New(nil, dedup.Config{MaxKeyLen: -1, Options: dedup.Options{Lease: time.Hour, TTL: time.Minute}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"nil", "negative", "TTL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestMiddlewareKeepsClaimWhenClientLeaves: the client gives up while the
// handler runs; the handler commits and returns without writing a
// response (an implicit 200). Its write happened, so the retry with the
// same key is a replay, not a second commit.
func TestMiddlewareKeepsClaimWhenClientLeaves(t *testing.T) {
	var commits atomic.Int64
	entered := make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if commits.Load() == 0 {
			close(entered)
			<-r.Context().Done()
		}
		commits.Add(1) // the write commits although the client left
	})
	h := newMiddleware(t, next, dedup.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(h, request(ctx, "POST", "/x", "k", "x"))
	}()
	<-entered
	cancel()
	<-done
	w := serve(h, request(t.Context(), "POST", "/x", "k", "x"))
	if n := commits.Load(); n != 1 {
		t.Fatalf("the write committed %d times, want 1", n)
	}
	if w.Code != http.StatusOK || w.Header().Get(dedup.HeaderReplayed) != "true" {
		t.Fatalf("retry: %d, replayed %q; want the first run's 200 replayed", w.Code, w.Header().Get(dedup.HeaderReplayed))
	}
}

// TestMiddlewareRefusalsNotKept: a response that refused the request did
// nothing, so it is not stored: the retry (with fresh credentials, after
// the Retry-After) runs the handler again, and its outcome is the one
// replayed afterwards.
func TestMiddlewareRefusalsNotKept(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 408, 409, 422, 429} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var runs atomic.Int64
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					w.Header().Set("Retry-After", "7")
					http.Error(w, "refused", status)
					return
				}
				w.WriteHeader(http.StatusCreated)
			})
			h := newMiddleware(t, next, dedup.Config{})
			if w := serve(h, request(t.Context(), "POST", "/x", "k", "")); w.Code != status || w.Header().Get("Retry-After") != "7" {
				t.Fatalf("first: %d %v", w.Code, w.Header())
			}
			if w := serve(h, request(t.Context(), "POST", "/x", "k", "")); w.Code != http.StatusCreated || w.Header().Get(dedup.HeaderReplayed) != "" {
				t.Fatalf("retry after a %d: %d, replayed %q; want the handler run again", status, w.Code, w.Header().Get(dedup.HeaderReplayed))
			}
			if w := serve(h, request(t.Context(), "POST", "/x", "k", "")); w.Code != http.StatusCreated || w.Header().Get(dedup.HeaderReplayed) != "true" {
				t.Fatalf("third: %d, replayed %q", w.Code, w.Header().Get(dedup.HeaderReplayed))
			}
			if n := runs.Load(); n != 2 {
				t.Fatalf("%d runs, want 2", n)
			}
		})
	}
}

// TestMiddlewareReplaysRetryAfter: an outcome that is kept keeps its
// Retry-After on replay (a 202 Accepted says when to look again).
func TestMiddlewareReplaysRetryAfter(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.Header().Set("Location", "/jobs/1")
		w.WriteHeader(http.StatusAccepted)
	})
	h := newMiddleware(t, next, dedup.Config{})
	serve(h, request(t.Context(), "POST", "/jobs", "k", ""))
	w := serve(h, request(t.Context(), "POST", "/jobs", "k", ""))
	if w.Code != http.StatusAccepted || w.Header().Get(dedup.HeaderReplayed) != "true" || w.Header().Get("Retry-After") != "30" {
		t.Fatalf("replay: %d %v", w.Code, w.Header())
	}
}

// keyRecorder is a MemoryStore that records the keys it is asked to
// claim.
type keyRecorder struct {
	*dedup.MemoryStore
	mu   sync.Mutex
	keys []string
}

func (k *keyRecorder) Claim(ctx context.Context, key string, fp dedup.Fingerprint, lease time.Duration) (dedup.Claim, error) {
	k.mu.Lock()
	k.keys = append(k.keys, key)
	k.mu.Unlock()
	return k.MemoryStore.Claim(ctx, key, fp, lease)
}

// TestMiddlewareDefaultScopeCredentials: with Scope nil, two users who
// send the same key and body each get their own write; neither gets the
// other's body or Location. The store sees a hash of the credentials,
// never the credentials.
func TestMiddlewareDefaultScopeCredentials(t *testing.T) {
	o := &orders{}
	store := &keyRecorder{MemoryStore: dedup.NewMemoryStore(dedup.MemoryOptions{})}
	h := newMiddleware(t, o, dedup.Config{Store: store})
	send := func(header, value string) *httptest.ResponseRecorder {
		r := request(t.Context(), "POST", "/orders", "k", "one widget")
		if header != "" {
			r.Header.Set(header, value)
		}
		return serve(h, r)
	}
	steps := []struct {
		header, value string
		location      string
		replayed      bool
	}{
		{"Authorization", "Bearer alice-token", "/orders/1", false},
		{"Authorization", "Bearer bob-token", "/orders/2", false},
		{"Authorization", "Bearer alice-token", "/orders/1", true},
		{"Cookie", "session=carol-session", "/orders/3", false},
		{"Cookie", "session=dave-session", "/orders/4", false},
		{"", "", "/orders/5", false},
		{"", "", "/orders/5", true},
		{"Cookie", "session=carol-session", "/orders/3", true},
	}
	for i, st := range steps {
		w := send(st.header, st.value)
		if got := w.Header().Get("Location"); got != st.location || (w.Header().Get(dedup.HeaderReplayed) == "true") != st.replayed {
			t.Fatalf("step %d (%s %q): Location %q, replayed %q; want %q, replayed %v", i, st.header, st.value, got, w.Header().Get(dedup.HeaderReplayed), st.location, st.replayed)
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	for _, k := range store.keys {
		for _, secret := range []string{"alice-token", "bob-token", "carol-session", "dave-session"} {
			if strings.Contains(k, secret) {
				t.Fatalf("the store key %q carries a credential", k)
			}
		}
	}
}

// TestMiddlewareDefaultScopeIgnoresHost: copies of one write sent to two
// replicas by their own addresses (as hedgehttp does, each with its
// replica's Host) are one write.
func TestMiddlewareDefaultScopeIgnoresHost(t *testing.T) {
	o := &orders{}
	h := newMiddleware(t, o, dedup.Config{})
	for _, host := range []string{"10.0.0.1:8080", "10.0.0.2:8080"} {
		r := request(t.Context(), "POST", "http://"+host+"/orders", "k", "x")
		r.Header.Set("Authorization", "Bearer alice-token")
		serve(h, r)
	}
	if n := o.runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

// TestMiddlewareRenewsLease: a handler that runs for three leases keeps
// its claim (the middleware renews the lease while it runs), so a copy
// that arrives meanwhile waits for its outcome instead of running the
// handler too.
func TestMiddlewareRenewsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = time.Second
		var runs atomic.Int64
		entered := make(chan struct{})
		next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if runs.Add(1) == 1 {
				close(entered)
				time.Sleep(3 * lease)
			}
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, "run %d", runs.Load())
		})
		h := newMiddleware(t, next, dedup.Config{Options: dedup.Options{Lease: lease}})
		first := make(chan *httptest.ResponseRecorder)
		go func() { first <- serve(h, request(t.Context(), "POST", "/x", "k", "")) }()
		<-entered
		second := serve(h, request(t.Context(), "POST", "/x", "k", ""))
		w := <-first
		if n := runs.Load(); n != 1 {
			t.Fatalf("the handler ran %d times, want 1", n)
		}
		if w.Body.String() != "run 1" || second.Body.String() != "run 1" || second.Header().Get(dedup.HeaderReplayed) != "true" {
			t.Fatalf("first %q, second %q (replayed %q)", w.Body, second.Body, second.Header().Get(dedup.HeaderReplayed))
		}
	})
}

// TestMiddlewareRefuseInProgress: with RefuseInProgress a copy that finds
// its key held by a running copy is answered 409 at once, without
// waiting; once the first copy's outcome is stored, copies replay it.
func TestMiddlewareRefuseInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &orders{block: make(chan struct{})}
		h := newMiddleware(t, o, dedup.Config{Options: dedup.Options{InProgress: dedup.RefuseInProgress}})
		first := make(chan *httptest.ResponseRecorder)
		go func() { first <- serve(h, request(t.Context(), "POST", "/orders", "k", "x")) }()
		synctest.Wait()
		w := serve(h, request(t.Context(), "POST", "/orders", "k", "x")) // returns while the first still runs
		if w.Code != http.StatusConflict || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "still in progress") {
			t.Fatalf("a copy while the first runs: %d %q %v", w.Code, w.Body, w.Header())
		}
		close(o.block)
		if w := <-first; w.Code != http.StatusCreated {
			t.Fatalf("first: %d", w.Code)
		}
		if w := serve(h, request(t.Context(), "POST", "/orders", "k", "x")); w.Code != http.StatusCreated || w.Header().Get(dedup.HeaderReplayed) != "true" {
			t.Fatalf("after the outcome: %d %v", w.Code, w.Header())
		}
		if n := o.runs.Load(); n != 1 {
			t.Fatalf("%d runs, want 1", n)
		}
	})
}

// TestMiddlewareRequireKey: with RequireKey a write without a key is
// refused with 400; safe methods pass without one.
func TestMiddlewareRequireKey(t *testing.T) {
	o := &orders{}
	h := newMiddleware(t, o, dedup.Config{RequireKey: true})
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		if w := serve(h, request(t.Context(), m, "/orders", "", "x")); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), dedup.HeaderKey) {
			t.Fatalf("%s without a key: %d %q", m, w.Code, w.Body)
		}
	}
	if o.runs.Load() != 0 {
		t.Fatal("a write without a key ran")
	}
	for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
		if w := serve(h, request(t.Context(), m, "/orders", "", "")); w.Code != http.StatusCreated {
			t.Fatalf("%s without a key: %d", m, w.Code)
		}
	}
	if w := serve(h, request(t.Context(), "POST", "/orders", "k", "x")); w.Code != http.StatusCreated {
		t.Fatalf("POST with a key: %d", w.Code)
	}
}

// TestMiddlewareLostClaimAnswersCommitted: the holder stalls past its
// lease, which it cannot renew, and another copy takes over and commits;
// the holder's handler, finding its claim lost (as a store's Commit tells
// it), answers 409, which is not kept. Its client gets the committed
// outcome, not the 409.
func TestMiddlewareLostClaimAnswersCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := noRenew{dedup.NewMemoryStore(dedup.MemoryOptions{})}
		stall := make(chan struct{})
		var runs atomic.Int64
		next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := runs.Add(1)
			if n == 1 {
				<-stall
				cl, _ := dedup.ClaimFromContext(r.Context())
				if err := store.Complete(r.Context(), cl, dedup.Outcome{Status: 201}, time.Hour); errors.Is(err, dedup.ErrLostClaim) {
					http.Error(w, err.Error(), http.StatusConflict)
					return
				}
			}
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, "run %d", n)
		})
		h := newMiddleware(t, next, dedup.Config{Store: store, Options: dedup.Options{Lease: time.Second}})
		first := make(chan *httptest.ResponseRecorder)
		go func() { first <- serve(h, request(t.Context(), "POST", "/x", "k", "")) }()
		synctest.Wait()
		second := serve(h, request(t.Context(), "POST", "/x", "k", "")) // takes over after the lease
		if second.Code != http.StatusCreated || second.Body.String() != "run 2" {
			t.Fatalf("second copy: %d %q", second.Code, second.Body)
		}
		close(stall)
		w := <-first
		if w.Code != http.StatusCreated || w.Body.String() != "run 2" || w.Header().Get(dedup.HeaderReplayed) != "true" {
			t.Fatalf("the holder that lost its claim answered %d %q (replayed %q), want the committed outcome", w.Code, w.Body, w.Header().Get(dedup.HeaderReplayed))
		}
	})
}
