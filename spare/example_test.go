package spare_test

import (
	"log"
	"net/http"

	"github.com/tailcut/hedge/spare"
)

// A server runs at most 64 requests at once; the hedge copies that
// clients send (hedgehttp marks them) run only when no primary wants the
// worker.
func ExampleHandler() {
	l, err := spare.New(spare.Config{Workers: 64})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		// ... read the item, honouring r.Context() ...
	})
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: spare.Handler(l, mux)}
	_ = srv // srv.ListenAndServe()
}
