package readme

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// TestHTTPSnippet runs the README's hedgehttp snippet against two real
// replicas, and checks the operation class it names.
func TestHTTPSnippet(t *testing.T) {
	var urls []string
	for range 2 {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(Item{ID: r.URL.Path})
		}))
		t.Cleanup(s.Close)
		urls = append(urls, s.URL)
	}
	replicaA, replicaB := urls[0], urls[1]

	h, _ := hedge.New(hedge.Config{Replicas: 2})
	tr, err := hedgehttp.New(nil, h, hedgehttp.Config{
		// Base URLs, such as "http://replica-a:8080".
		Replicas: []string{replicaA, replicaB},
		// The route without the method: the class is "GET /items/{id}".
		Route: func(r *http.Request) string { return "/items/{id}" },
	})
	client := &http.Client{Transport: tr}

	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	resp, err := client.Get(replicaA + "/items/42")
	if err != nil {
		t.Fatal(err)
	}
	var it Item
	err = json.NewDecoder(resp.Body).Decode(&it)
	resp.Body.Close()
	if err != nil || it.ID != "/items/42" {
		t.Fatalf("GET /items/42 = %+v, %v", it, err)
	}
	if st := h.OpStats("GET /items/{id}"); st.Requests != 1 {
		t.Fatalf("class \"GET /items/{id}\" saw %d requests, want 1 (classes: %v)", st.Requests, h.Stats())
	}
}
