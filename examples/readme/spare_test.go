package readme

import (
	"io"
	"log"
	"net"
	"net/http"
	"testing"

	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/spare"
)

// TestSpareSnippet runs the README's spare-capacity server snippet on a
// loopback listener and sends it a primary and a hedge copy.
func TestSpareSnippet(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	func() {
		// Workers: the requests this server runs at once without slowing down.
		lim, err := spare.New(spare.Config{Workers: 8})
		if err != nil {
			log.Fatal(err)
		}
		srv := &http.Server{Handler: spare.Handler(lim, app)}
		go srv.Serve(ln)
		defer srv.Close()

		for _, attempt := range []string{"", "1"} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
			if attempt != "" {
				req.Header.Set(hedgehttp.AttemptHeader, attempt)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(b) != "ok" {
				t.Fatalf("%d %q", resp.StatusCode, b)
			}
		}
		if st := lim.Stats(); st.Primaries != 1 || st.Copies != 1 {
			t.Fatalf("stats %+v, want one primary and one copy", st)
		}
	}()
	http.DefaultClient.CloseIdleConnections()
}
