package readme

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/tailcut/hedge"
)

// Item is what the README's store serves.
type Item struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// itemClient reads items from one replica over HTTP.
type itemClient struct{ base string }

func (c itemClient) GetItem(ctx context.Context, id string) (*Item, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/items/"+id, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("replica %s: %s", c.base, resp.Status)
	}
	var it Item
	return &it, json.NewDecoder(resp.Body).Decode(&it)
}

// itemServers starts n replicas serving GET /items/{id}.
func itemServers(t *testing.T, n int) []itemClient {
	t.Helper()
	var clients []itemClient
	for i := range n {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(Item{ID: r.PathValue("id"), Name: fmt.Sprintf("item %s from replica %d", r.PathValue("id"), i)})
		})
		s := httptest.NewServer(mux)
		t.Cleanup(s.Close)
		clients = append(clients, itemClient{base: s.URL})
	}
	return clients
}

// TestLibrarySnippet runs the README's first snippet against three real
// HTTP replicas.
func TestLibrarySnippet(t *testing.T) {
	clients := itemServers(t, 3)
	ctx := context.Background()
	id := "42"

	h, err := hedge.New(hedge.Config{Replicas: 3}) // once per backend; share it
	if err != nil {
		log.Fatal(err) // every mistake in the config, each with what to do
	}

	item, err := hedge.Do(ctx, h, "GetItem", func(ctx context.Context, a hedge.Attempt) (*Item, error) {
		// a.Index: 0 for the primary, 1 for a hedge; a.Replica: never the
		// replica of another copy of this request; honour ctx.
		return clients[a.Replica].GetItem(ctx, id)
	})

	if err != nil || item.ID != "42" {
		t.Fatalf("GetItem = %+v, %v", item, err)
	}
	if st := h.OpStats("GetItem"); st.Requests != 1 || st.PrimaryWins != 1 {
		t.Fatalf("stats %v, want one request won by its primary", st)
	}
}

// TestDoFanSnippet runs the README's DoFan snippet: ten leaves over three
// real HTTP replicas.
func TestDoFanSnippet(t *testing.T) {
	clients := itemServers(t, 3)
	h, err := hedge.New(hedge.Config{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}

	res, err := hedge.DoFan(ctx, h, "GetItem", len(ids), hedge.FanOut{}, func(ctx context.Context, i int, a hedge.Attempt) (*Item, error) {
		return clients[a.Replica].GetItem(ctx, ids[i])
	})
	// res.Values[i] is leaf i's item; err is nil when every leaf answered.

	if err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		if res.Values[i].ID != ids[i] {
			t.Fatalf("leaf %d: %+v", i, res.Values[i])
		}
	}
	if st := h.OpStats("GetItem"); st.Requests != int64(len(ids)) || st.Fan.Requests != 1 || st.Fan.Leaves != int64(len(ids)) {
		t.Fatalf("stats %v, fan-outs %+v", st, st.Fan)
	}
}

// TestFanOutSnippet runs the README's fan-out snippet: ten leaves over
// three real HTTP replicas.
func TestFanOutSnippet(t *testing.T) {
	clients := itemServers(t, 3)
	h, err := hedge.New(hedge.Config{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}
	items, errs := make([]*Item, len(ids)), make([]error, len(ids))

	ctx = hedge.WithFanOut(ctx) // one per user request
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			items[i], errs[i] = hedge.Do(ctx, h, "GetItem", func(ctx context.Context, a hedge.Attempt) (*Item, error) {
				return clients[a.Replica].GetItem(ctx, id)
			})
		})
	}
	wg.Wait()

	for i := range ids {
		if errs[i] != nil || items[i].ID != ids[i] {
			t.Fatalf("leaf %d: %+v, %v", i, items[i], errs[i])
		}
	}
	if st := h.OpStats("GetItem"); st.Requests != int64(len(ids)) {
		t.Fatalf("stats %v, want %d requests", st, len(ids))
	}
}
