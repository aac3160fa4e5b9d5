package tied_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/tied"
)

// Two replicas run the middleware, each naming the other as its peer; a
// client sends tied requests to both through hedgehttp.
func Example() {
	secret := []byte("replace with 32+ random bytes shared by the servers")
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })

	a, b := httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	urlA, urlB := "http://"+a.Listener.Addr().String(), "http://"+b.Listener.Addr().String()
	for _, s := range []struct {
		ts   *httptest.Server
		peer string
	}{{a, urlB}, {b, urlA}} {
		srv, err := tied.NewServer(tied.Config{Workers: 4, Secret: secret, Peers: []string{s.peer}})
		if err != nil {
			panic(err)
		}
		defer srv.Close()
		s.ts.Config.Handler = srv.Handler(app)
		s.ts.Start()
		defer s.ts.Close()
	}

	h, _ := hedge.New(hedge.Config{Replicas: 2})
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr, err := hedgehttp.New(base, h, hedgehttp.Config{Replicas: []string{urlA, urlB}, Tied: &hedgehttp.TiedConfig{}})
	if err != nil {
		panic(err)
	}
	resp, err := (&http.Client{Transport: tr}).Get(urlA + "/greeting")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body), tr.TiedClient().Stats().Calls)
	// Output: 200 hello 1
}
