package hedgehttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/tied"
)

// tiedServers starts n real servers on loopback, each a peer of the
// others, with cfg (Secret and Peers filled in); server i serves
// handler(i, its tied.Server).
func tiedServers(t *testing.T, n int, cfg tied.Config, handler func(i int, s *tied.Server) http.Handler) (urls []string, ts []*httptest.Server, servers []*tied.Server) {
	t.Helper()
	for range n {
		s := httptest.NewUnstartedServer(nil)
		ts = append(ts, s)
		urls = append(urls, "http://"+s.Listener.Addr().String())
	}
	for i := range ts {
		c := cfg
		c.Secret, c.Peers = tiedSecret, nil
		for j, u := range urls {
			if j != i {
				c.Peers = append(c.Peers, u)
			}
		}
		s, err := tied.NewServer(c)
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
		ts[i].Config.Handler = handler(i, s)
		ts[i].Start()
	}
	t.Cleanup(func() {
		for i := range ts {
			ts[i].Close()
			servers[i].Close()
		}
	})
	return urls, ts, servers
}

// One of N replicas is closed mid-run: a tied copy sent to it fails to
// dial, which proves that no server acted on it, so it neither ends the
// call nor keeps its twin from being sent. At most one call in a thousand
// may fail: a copy written on a kept-alive connection just as the server
// closed it is not provably unsent (the transport retries it, and the
// retry's dial fails), which happens to a few calls at the moment of the
// close at most, however many calls follow.
func TestTiedOneReplicaDown(t *testing.T) {
	const calls, parallel, closeAfter = 4000, 4, 200
	for _, n := range []int{2, 3} {
		t.Run(strconv.Itoa(n)+" replicas", func(t *testing.T) {
			urls, ts, _ := tiedServers(t, n, tied.Config{Workers: 4}, func(int, *tied.Server) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
			})
			h, err := hedge.New(hedge.Config{Replicas: n})
			if err != nil {
				t.Fatal(err)
			}
			base := &http.Transport{MaxIdleConnsPerHost: 2 * parallel}
			defer base.CloseIdleConnections()
			tr, err := hedgehttp.New(base, h, hedgehttp.Config{Replicas: urls, Tied: &hedgehttp.TiedConfig{}})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}

			var next, done, failed atomic.Int64
			closed := make(chan struct{})
			var closeOnce sync.Once
			var firstErr atomic.Value
			var wg sync.WaitGroup
			for range parallel {
				wg.Go(func() {
					for next.Add(1) <= calls {
						req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, urls[0]+"/item", nil)
						resp, err := client.Do(req)
						if err == nil {
							var b []byte
							b, err = io.ReadAll(resp.Body)
							resp.Body.Close()
							if err == nil && (resp.StatusCode != 200 || string(b) != "ok") {
								err = fmt.Errorf("%s %q", resp.Status, b)
							}
						}
						if err != nil {
							failed.Add(1)
							firstErr.CompareAndSwap(nil, err.Error())
						}
						if done.Add(1) == closeAfter {
							closeOnce.Do(func() {
								go func() {
									ts[n-1].Close() // replica n-1 goes down mid-run
									close(closed)
								}()
							})
						}
					}
				})
			}
			wg.Wait()
			<-closed
			f := failed.Load()
			t.Logf("%d replicas, one closed after %d calls: %d of %d tied calls failed (%.2f%%); first error: %v; client %+v",
				n, closeAfter, f, calls, 100*float64(f)/calls, firstErr.Load(), tr.TiedClient().Stats())
			if f*1000 > calls {
				t.Errorf("%d of %d tied calls failed with one replica down, want at most 0.1%%; first error: %v", f, calls, firstErr.Load())
			}
		})
	}
}
