package hedgehttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// New wraps a transport so that a slow request is hedged. Here the
// backend never answers the first copy of a request; the hedge, sent after
// 10 ms on another connection and marked Hedge-Attempt: 1, answers.
func ExampleNew() {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hedgehttp.AttemptIndex(r)
		if n == 0 {
			<-r.Context().Done() // stuck until the client gives up
			return
		}
		fmt.Fprintf(w, "answered by hedge %d", n)
	}))
	defer backend.Close()

	h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(10 * time.Millisecond)})
	if err != nil {
		panic(err)
	}
	t, err := hedgehttp.New(nil, h, hedgehttp.Config{
		// Operation classes from a route template, never the raw path.
		Route: func(r *http.Request) string { return "/items/{id}" },
	})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: t}
	defer client.CloseIdleConnections()

	resp, err := client.Get(backend.URL + "/items/42")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body) // readable to the end: the loser was cancelled, not the winner
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	st := h.OpStats("GET /items/{id}")
	fmt.Println("hedges:", st.Hedges, "hedge wins:", st.HedgeWins)
	// Output:
	// 200 answered by hedge 1
	// hedges: 1 hedge wins: 1
}

// With Replicas, every copy of a request addressed to the service goes to
// a replica the Hedger picks, with all its headers: the replicas are one
// service, the default CredentialScope. A redirect to another host is
// followed there, once, untouched. Route gives the route template alone:
// the Transport puts the method in front of it.
func ExampleConfig_replicas() {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s from the other host", r.URL.Path)
	}))
	defer other.Close()
	replica := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/items/moved" {
			http.Redirect(w, r, other.URL+"/elsewhere", http.StatusFound)
			return
		}
		fmt.Fprintf(w, "%s from a replica, Authorization %q", r.URL.Path, r.Header.Get("Authorization"))
	})
	a, b := httptest.NewServer(replica), httptest.NewServer(replica)
	defer a.Close()
	defer b.Close()

	h, err := hedge.New(hedge.Config{Replicas: 2})
	if err != nil {
		panic(err)
	}
	t, err := hedgehttp.New(nil, h, hedgehttp.Config{
		Replicas: []string{a.URL, b.URL},
		Route: func(r *http.Request) string {
			if strings.HasPrefix(r.URL.Path, "/items/") {
				return "/items/{id}" // not "GET /items/{id}"
			}
			return ""
		},
	})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: t}
	defer client.CloseIdleConnections()

	for _, path := range []string{"/items/42", "/items/moved"} {
		req, err := http.NewRequest("GET", a.URL+path, nil)
		if err != nil {
			panic(err)
		}
		req.Header.Set("Authorization", "Bearer t0k3n")
		resp, err := client.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(string(body))
	}
	for _, st := range h.Stats() {
		fmt.Printf("class %q: %d requests\n", st.Op, st.Requests)
	}
	fmt.Println("to other origins:", t.Stats().OtherOrigins)
	// Output:
	// /items/42 from a replica, Authorization "Bearer t0k3n"
	// /elsewhere from the other host
	// class "GET /items/{id}": 2 requests
	// to other origins: 1
}
