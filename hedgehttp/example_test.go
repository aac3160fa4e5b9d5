package hedgehttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
