package dedupsqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/tailcut/hedge/dedup"
	"github.com/tailcut/hedge/dedup/dedupsqlite"
)

// A handler behind the middleware commits its own write and the outcome
// in one transaction with Commit, fenced by the claim the middleware made:
// even a copy that outlived its lease cannot commit the order twice.
//
// What to pass and what to write: the TTL is the middleware's (from its
// Coordinator), so that the outcome Commit stores lives as long as one the
// middleware stores; the Outcome is what every copy is to be answered
// (status, the headers to replay, the body); and the handler writes the
// Outcome Commit returns, which is the one stored — its own, or, if this
// claim had already completed, the earlier one — so that the first client
// and every replay see the same answer. The middleware's own Complete
// afterwards finds the outcome stored and keeps it.
func ExampleStore_Commit() {
	dir, err := os.MkdirTemp("", "dedup-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := dedupsqlite.Open(ctx, filepath.Join(dir, "orders.db"), dedupsqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if _, err := store.DB().ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)"); err != nil {
		log.Fatal(err)
	}

	var mw *dedup.Handler
	order := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cl, ok := dedup.ClaimFromContext(r.Context())
		if !ok { // no Idempotency-Key: this sketch refuses it
			http.Error(w, "send an Idempotency-Key", http.StatusBadRequest)
			return
		}
		ttl := mw.Coordinator().Options().TTL
		out, err := store.Commit(r.Context(), cl, ttl, func(ctx context.Context, tx *sql.Tx) (dedup.Outcome, error) {
			res, err := tx.ExecContext(ctx, "INSERT INTO orders (item) VALUES ('widget')")
			if err != nil {
				return dedup.Outcome{}, err
			}
			id, _ := res.LastInsertId()
			return dedup.Outcome{
				Status: http.StatusCreated,
				Header: http.Header{"Location": {fmt.Sprintf("/orders/%d", id)}},
				Body:   []byte(fmt.Sprintf("order %d", id)),
			}, nil
		})
		if err != nil {
			// Lost claim or a failed write: nothing was committed. A 503
			// is not kept, so a retry runs again.
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		for k, vs := range out.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(out.Status)
		w.Write(out.Body)
	})
	mw, err = dedup.New(order, dedup.Config{Store: store})
	if err != nil {
		log.Fatal(err)
	}

	for range 2 {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"item":"widget"}`))
		r.Header.Set(dedup.HeaderKey, "4f1c2b7e-order-1")
		w := httptest.NewRecorder()
		mw.ServeHTTP(w, r)
		fmt.Printf("%d %s %q replayed=%q\n", w.Code, w.Header().Get("Location"), w.Body, w.Header().Get(dedup.HeaderReplayed))
	}
	var n int
	store.DB().QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&n)
	fmt.Println(n, "order committed")
	// Output:
	// 201 /orders/1 "order 1" replayed=""
	// 201 /orders/1 "order 1" replayed="true"
	// 1 order committed
}
