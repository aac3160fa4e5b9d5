package dedup_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/tailcut/hedge/dedup"
)

// The middleware runs a keyed write once; a second copy of the request
// (a hedge, a retry) gets the stored outcome, marked as a replay.
func ExampleNew() {
	var balance atomic.Int64
	credit := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "balance %d", balance.Add(5)) // not idempotent
	})
	h, err := dedup.New(credit, dedup.Config{}) // in-memory store; share a store across replicas
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		r := httptest.NewRequest("POST", "/credit", strings.NewReader(`{"amount":5}`))
		r.Header.Set("Idempotency-Key", "01890a5d-ac96-774b-bcce-b302099a8057")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Body)
		fmt.Printf("%d %s replayed=%q\n", w.Code, body, w.Header().Get("Idempotent-Replayed"))
	}
	// Output:
	// 200 balance 5 replayed=""
	// 200 balance 5 replayed="true"
}

// The same key with a different request is refused with 422.
func ExampleNew_mismatch() {
	h, _ := dedup.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), dedup.Config{})
	for _, body := range []string{`{"amount":5}`, `{"amount":500}`} {
		r := httptest.NewRequest("POST", "/credit", strings.NewReader(body))
		r.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code)
	}
	// Output:
	// 200
	// 422
}

// A Coordinator is the transport-neutral core: claim, run, complete.
func ExampleCoordinator() {
	ctx := context.Background()
	c, _ := dedup.NewCoordinator(dedup.NewMemoryStore(dedup.MemoryOptions{}), dedup.Options{})
	fp := dedup.FingerprintOf([]byte("transfer"), []byte(`{"to":"bob","amount":5}`))
	for range 2 {
		cl, err := c.Acquire(ctx, "k1", fp)
		if err != nil {
			log.Fatal(err)
		}
		if !cl.Won {
			fmt.Printf("replay: %s\n", cl.Existing.Outcome.Body)
			continue
		}
		// ... run the operation ...
		if err := c.Complete(ctx, cl, dedup.Outcome{Status: 200, Body: []byte("sent")}); err != nil {
			log.Fatal(err)
		}
		fmt.Println("ran once")
	}
	// Output:
	// ran once
	// replay: sent
}
