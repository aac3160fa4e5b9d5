package readme

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/tailcut/hedge"
)

// Hits is what a search shard answers.
type Hits struct {
	Shard  int    `json:"shard"`
	Server int    `json:"server"`
	Query  string `json:"query"`
}

// searchClient searches the shards that one server holds, over HTTP.
type searchClient struct{ base string }

func (c searchClient) Search(ctx context.Context, shard int, query string) (*Hits, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/search/%d?q=%s", c.base, shard, query), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("server %s, shard %d: %s", c.base, shard, resp.Status)
	}
	var h Hits
	return &h, json.NewDecoder(resp.Body).Decode(&h)
}

// searchServers starts shards*replicas servers on loopback, server v
// holding shard v/replicas only (hedge.ShardGrid's layout): a request for
// another shard gets 404.
func searchServers(t *testing.T, shards, replicas int) []searchClient {
	t.Helper()
	var clients []searchClient
	for v := range shards * replicas {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /search/{shard}", func(w http.ResponseWriter, r *http.Request) {
			s, err := strconv.Atoi(r.PathValue("shard"))
			if err != nil || s != v/replicas {
				http.NotFound(w, r)
				return
			}
			json.NewEncoder(w).Encode(Hits{Shard: s, Server: v, Query: r.URL.Query().Get("q")})
		})
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		clients = append(clients, searchClient{base: srv.URL})
	}
	return clients
}

// TestShardsSnippet runs the README's and the fan-out guide's sharded
// snippet: 30 shards of 2 real HTTP servers each, every leaf read from
// one of its shard's servers.
func TestShardsSnippet(t *testing.T) {
	servers := searchServers(t, 30, 2)
	ctx := context.Background()
	query := "hedge"

	h, err := hedge.New(hedge.Config{
		Replicas: 30 * 2,                 // every server: shard s on servers 2s and 2s+1
		Shards:   hedge.ShardGrid(30, 2), // 30 shards x 2 replicas
	})
	if err != nil {
		log.Fatal(err)
	}

	res, err := hedge.DoFan(ctx, h, "Search", 30, hedge.FanOut{}, func(ctx context.Context, i int, a hedge.Attempt) (*Hits, error) {
		// Leaf i reads shard i (a.Shard) from one of its servers (a.Replica).
		return servers[a.Replica].Search(ctx, a.Shard, query)
	})

	if err != nil {
		t.Fatal(err)
	}
	for i, hits := range res.Values {
		if hits.Shard != i || hits.Server/2 != i || hits.Query != query {
			t.Errorf("leaf %d: %+v; want shard %d's hits from server %d or %d", i, hits, i, 2*i, 2*i+1)
		}
	}
	st := h.OpStats("Search")
	if st.Fan.Requests != 1 || len(st.Shards) != 30 || st.Shards[29].Leaves != 1 {
		t.Errorf("stats %v", st)
	}
}
