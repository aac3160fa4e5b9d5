package readme

import (
	"crypto/rand"
	"io"
	"log"
	"net"
	"net/http"
	"testing"

	"github.com/tailcut/hedge/tied"
)

// TestTiedSnippet runs the README's tied server snippet on a loopback
// listener and sends it an untied request, which runs as any other.
func TestTiedSnippet(t *testing.T) {
	secret := make([]byte, tied.MinSecret)
	rand.Read(secret)
	peers := []string{"http://127.0.0.1:1"} // a peer that is never reached: no tied request here
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	func() {
		// secret: at least tied.MinSecret random bytes, shared by the servers only.
		// peers: the other servers' base URLs, such as "http://10.0.0.2:8080".
		ts, err := tied.NewServer(tied.Config{Workers: 8, Secret: secret, Peers: peers})
		if err != nil {
			log.Fatal(err)
		}
		defer ts.Close()
		srv := &http.Server{Handler: ts.Handler(app)}
		go srv.Serve(ln)
		defer srv.Close()

		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(b) != "ok" {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
		if st := ts.Stats(); st.Started != 1 {
			t.Fatalf("stats %+v, want one request started", st)
		}
	}()
}
