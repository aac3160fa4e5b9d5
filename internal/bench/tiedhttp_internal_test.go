package bench

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/tied"
)

// Received counts the application's requests and not the claims between
// the servers, whichever path a claim is posted to: the claim path or
// its earlier name, where servers of earlier versions post.
func TestTiedHTTPReceivedExcludesClaims(t *testing.T) {
	secret := []byte("a secret the bench servers share, 32 bytes or more")
	tb, err := StartTiedHTTP(TiedBackendOptions{Replicas: 2, Workers: 1, MaxQueue: 16, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	b := tb.(*TiedHTTPBackend)
	defer b.Close()
	client := &http.Client{Transport: &http.Transport{}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	do := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, b.urls[0]+path, strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s %q", method, path, resp.Status, out)
		}
		return string(out)
	}
	//lint:ignore SA1019 servers of earlier versions still claim at the deprecated path, which must keep working
	for _, p := range []string{tied.DefaultClaimPath, tied.DefaultCancelPath} {
		msg := tied.Claim{ID: tied.NewID(), Ticket: 1, Sent: time.Now()}.Sign(secret)
		if got := do(http.MethodPost, p, msg); got != tied.VerdictGo.String() {
			t.Errorf("claim at %s: %q, want go", p, got)
		}
	}
	if n := b.Received(); n != 0 {
		t.Errorf("Received() = %d after two claims, want 0", n)
	}
	do(http.MethodGet, "/work?us=0", "")
	if n := b.Received(); n != 1 {
		t.Errorf("Received() = %d after one request, want 1", n)
	}
	if s := b.Servers()[0].Stats(); s.ClaimsReceived != 2 {
		t.Errorf("%+v, want 2 claims received", s)
	}
}

// With Spare, a replica's worker limit is a spare.Limiter: a primary that
// finds its only worker held by a copy preempts the copy.
func TestTiedHTTPSparePreemptsACopy(t *testing.T) {
	tb, err := StartTiedHTTP(TiedBackendOptions{Replicas: 2, Workers: 1, MaxQueue: 16, Spare: true, Secret: tiedSecret()})
	if err != nil {
		t.Fatal(err)
	}
	b := tb.(*TiedHTTPBackend)
	defer b.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	copyDone := make(chan struct{})
	go func() {
		defer close(copyDone)
		// A copy that would hold the worker for a minute.
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.urls[0]+"/work?us=60000000", nil)
		req.Header.Set(hedgehttp.AttemptHeader, "1")
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	// Wait, however long it takes, until the copy holds the worker: the
	// primary must find it there. The test's own timeout bounds a hang.
	lim := b.Limiters()[0]
	for lim.Stats().Running == 0 {
		time.Sleep(time.Millisecond)
	}
	resp, err := client.Get(b.urls[0] + "/work?us=0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := lim.Stats(); s.Preempted != 1 || s.Primaries != 1 {
		t.Errorf("%+v: want the primary to have preempted the copy", s)
	}
	cancel()
	<-copyDone
}
