package hedgectl_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgectl"
)

// The control endpoint mounted under /debug/hedge/, and the kill switch
// thrown from outside (here, from loopback): a POST of a JSON body, as
// curl -X POST -H 'Content-Type: application/json' -d '{"mode":"off"}'
// sends it.
func ExampleNew() {
	items, _ := hedge.New(hedge.Config{Replicas: 3})
	ctl, err := hedgectl.New(map[string]*hedge.Hedger{"items": items}, hedgectl.Options{})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/hedge/", http.StripPrefix("/debug/hedge", ctl))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/debug/hedge/mode", "application/json", strings.NewReader(`{"mode":"off"}`))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status, items.Mode())
	// Output: 200 OK off
}
