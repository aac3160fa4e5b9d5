package hedgehttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/tied"
)

// tiedHang bounds the waits of the tied tests, which synchronise on
// channels: it turns a bug into a failure instead of a hang.
const tiedHang = 2 * time.Minute

var tiedSecret = []byte("a secret the two test servers share, 32+ bytes")

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// tiedPair starts two servers with one worker each behind tied.Server's
// middleware. Server i runs app(i); onDrop[i] is closed when server i
// answers a copy "dropped".
func tiedPair(t *testing.T, app func(i int) http.Handler) (urls [2]string, servers [2]*tied.Server, onDrop [2]chan struct{}) {
	t.Helper()
	for i := range onDrop {
		onDrop[i] = make(chan struct{})
	}
	u, _, s := tiedServers(t, 2, tied.Config{Workers: 1, ClaimTimeout: tiedHang}, func(i int, s *tied.Server) http.Handler {
		var once sync.Once
		h := s.Handler(app(i))
		drop := onDrop[i]
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &statusRecorder{ResponseWriter: w, code: 200}
			h.ServeHTTP(rec, r)
			if rec.code == http.StatusConflict {
				once.Do(func() { close(drop) })
			}
		})
	})
	copy(urls[:], u)
	copy(servers[:], s)
	return urls, servers, onDrop
}

// Two real servers with one worker each, A busy: in the symmetric form
// the tied call's copy on the idle B claims the tie, which drops the copy
// queued at A without running it; in the spare form either the spare on
// B does the same to the primary queued at A, or the primary runs on B
// and the spare is refused at A. Either way the call answers with B's
// response, and A runs nothing of it.
func TestTiedEndToEnd(t *testing.T) {
	for _, form := range []tied.Form{tied.FormSymmetric, tied.FormSpare} {
		t.Run(form.String(), func(t *testing.T) { testTiedEndToEnd(t, form) })
	}
}

func testTiedEndToEnd(t *testing.T, form tied.Form) {
	blockA := make(chan struct{})
	startedA := make(chan struct{})
	var onDrop [2]chan struct{}
	var ranTiedOnA atomic.Bool
	app := func(i int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/busy":
				close(startedA)
				<-blockA
			case i == 0:
				ranTiedOnA.Store(true)
			default:
				// The winner answers only once A dropped its sibling,
				// so that the client cannot cancel the sibling first.
				select {
				case <-onDrop[0]:
				case <-time.After(tiedHang):
				}
			}
			io.WriteString(w, "from "+string(rune('A'+i)))
		})
	}
	urls, servers, drops := tiedPair(t, app)
	onDrop = drops

	base := &http.Transport{}
	defer base.CloseIdleConnections()
	busy := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: base}).Get(urls[0] + "/busy")
		if err == nil {
			resp.Body.Close()
		}
		busy <- err
	}()
	<-startedA

	h, err := hedge.New(hedge.Config{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := hedgehttp.New(base, h, hedgehttp.Config{Replicas: urls[:], Tied: &hedgehttp.TiedConfig{Gap: time.Millisecond, Form: form}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), tiedHang)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, urls[0]+"/item", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "from B" {
		t.Fatalf("got %s %q, want 200 from B", resp.Status, body)
	}
	close(blockA)
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	if ranTiedOnA.Load() {
		t.Error("the copy on the busy server ran")
	}
	sa, sb := servers[0].Stats(), servers[1].Stats()
	if sa.Dropped+sa.NoSpare != 1 || sa.TiedStarted != 0 {
		t.Errorf("A: %+v, want its copy dropped or refused", sa)
	}
	// B's copy claimed, unless it was the spare form's primary.
	if sb.TiedStarted != 1 || sb.ClaimsWon != 1-sa.NoSpare {
		t.Errorf("B: %+v, want 1 tied start and %d claim won", sb, 1-sa.NoSpare)
	}
	if form == tied.FormSymmetric && sa.NoSpare != 0 {
		t.Errorf("A refused a spare of the symmetric form: %+v", sa)
	}
	if cs := tr.TiedClient().Stats(); cs.Calls != 1 || cs.Failures != 0 {
		t.Errorf("client: %+v", cs)
	}
}

// Tied requests need replicas, and a write without a key is sent once,
// untied.
func TestTiedConfigAndWrites(t *testing.T) {
	h, _ := hedge.New(hedge.Config{})
	if _, err := hedgehttp.New(nil, h, hedgehttp.Config{Tied: &hedgehttp.TiedConfig{}}); err == nil || !strings.Contains(err.Error(), "Tied needs Config.Replicas") {
		t.Errorf("Tied without Replicas: %v", err)
	}
	var tiedHeaders atomic.Int64
	urls, _, _ := tiedPair(t, func(i int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(tied.IDHeader) != "" {
				tiedHeaders.Add(1)
			}
		})
	})
	h2, _ := hedge.New(hedge.Config{Replicas: 2})
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr, err := hedgehttp.New(base, h2, hedgehttp.Config{Replicas: urls[:], Tied: &hedgehttp.TiedConfig{Addrs: []string{"http://a:1", "http://b:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Post(urls[1]+"/w", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if tiedHeaders.Load() != 0 || tr.TiedClient().Stats().Calls != 0 {
		t.Errorf("a write without a key went tied")
	}
	if _, err := hedgehttp.New(base, h2, hedgehttp.Config{Replicas: urls[:], Tied: &hedgehttp.TiedConfig{Addrs: []string{"x"}}}); err == nil {
		t.Error("Addrs of the wrong length accepted")
	}
}
