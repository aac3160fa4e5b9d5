package hedgehttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// NewShards takes the base URLs of each shard's replicas; Fan sends one
// request per leaf, leaf i to a server of shard i mod 3, and reads each
// winning answer inside its copy.
func ExampleNewShards() {
	var urls [][]string
	for s := range 3 {
		var replicas []string
		for range 2 {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "shard %d: %s", s, r.URL.Query().Get("q"))
			}))
			defer srv.Close()
			replicas = append(replicas, srv.URL)
		}
		urls = append(urls, replicas)
	}

	sh, err := hedgehttp.NewShards(nil, urls, hedgehttp.ShardConfig{})
	if err != nil {
		panic(err)
	}
	defer sh.CloseIdleConnections()
	reqs := make([]*http.Request, 3)
	for i := range reqs {
		reqs[i], err = http.NewRequest(http.MethodGet, "/search?q=tail", nil)
		if err != nil {
			panic(err)
		}
	}
	res, err := hedgehttp.Fan(context.Background(), sh, reqs, hedge.FanOut{}, func(i int, resp *http.Response) (string, error) {
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.Join(res.Values, "\n"))
	fmt.Println(len(sh.Servers()), "servers")
	// Output:
	// shard 0: tail
	// shard 1: tail
	// shard 2: tail
	// 6 servers
}
