package hedgectl_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgectl"
)

// browserHang bounds every wait of the browser test: it turns a stuck
// browser into a failure, and is far longer than any step takes.
const browserHang = 3 * time.Minute

// TestBrowserCrossSitePosts: a page of another site, open in a real
// Chromium, posts forms to the endpoint on 127.0.0.1 (a urlencoded one,
// and a text/plain one shaped as JSON, with the mode in the query too),
// and tries a JSON fetch: the
// forms are refused and the fetch never leaves its preflight, so the
// mode stays on. It needs /usr/bin/chromium (or HEDGE_CHROMIUM) and is
// skipped without it, unless HEDGE_REQUIRE_DEPS=1, when it fails.
func TestBrowserCrossSitePosts(t *testing.T) {
	exe := "/usr/bin/chromium"
	if p := os.Getenv("HEDGE_CHROMIUM"); p != "" {
		exe = p
	}
	if _, err := os.Stat(exe); err != nil {
		msg := fmt.Sprintf("the browser test needs Chromium at %s (apt-get install -y chromium, or set HEDGE_CHROMIUM): %v", exe, err)
		if os.Getenv("HEDGE_REQUIRE_DEPS") == "1" {
			t.Fatal(msg + " (HEDGE_REQUIRE_DEPS=1: not skipping)")
		}
		t.Skip(msg)
	}
	h := mustNew(t, hedge.Config{})
	ctl, err := hedgectl.New(map[string]*hedge.Hedger{"items": h}, hedgectl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	posts := make(chan int, 16) // the status of each POST the endpoint answered
	ctlTS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		ctl.ServeHTTP(rec, r)
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		if r.Method == http.MethodPost {
			posts <- rec.Code
		}
	}))
	defer ctlTS.Close()
	mode := html.EscapeString(ctlTS.URL + "/mode")

	// The other site's pages: each submits its form, or fetches, at once.
	settled := make(chan string, 1) // the JSON fetch's outcome, as the page saw it
	pages := map[string]string{
		"/urlencoded": `<form method="post" action="` + mode + `"><input name="mode" value="off"></form>
<script>document.forms[0].submit()</script>`,
		"/plain": `<form method="post" enctype="text/plain" action="` + mode + `?mode=off"><input name='{"mode":"off","x":"' value='"}'></form>
<script>document.forms[0].submit()</script>`,
		"/json": `<script>
fetch("` + ctlTS.URL + `/mode", {method: "POST", headers: {"Content-Type": "application/json"}, body: '{"mode":"off"}'})
  .then(r => "sent: " + r.status, e => "refused: " + e)
  .then(s => fetch("/settled", {method: "POST", body: s}))
</script>`,
	}
	pageTS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/settled" {
			b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<10))
			settled <- string(b)
			return
		}
		page, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><title>elsewhere</title>"+page)
	}))
	defer pageTS.Close()
	// localhost is another site than 127.0.0.1, though the same machine.
	elsewhere := strings.Replace(pageTS.URL, "127.0.0.1", "localhost", 1)

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	ctx, cancelTime := context.WithTimeout(ctx, browserHang)
	defer cancelTime()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	for _, form := range []string{"/urlencoded", "/plain"} {
		// The page navigates away as it submits: Navigate's own error
		// says nothing; the endpoint's answer does.
		_ = chromedp.Do(ctx, chromedp.Navigate(elsewhere+form))
		select {
		case code := <-posts:
			if code != http.StatusForbidden || h.Mode() != hedge.On {
				t.Errorf("%s form from %s: answered %d, mode %v; want 403 and on", form, elsewhere, code, h.Mode())
			}
		case <-ctx.Done():
			t.Fatalf("%s form: the endpoint saw no POST", form)
		}
	}
	_ = chromedp.Do(ctx, chromedp.Navigate(elsewhere+"/json"))
	select {
	case outcome := <-settled:
		if !strings.HasPrefix(outcome, "refused") {
			t.Errorf("the JSON fetch from %s: %s, want it refused at its preflight", elsewhere, outcome)
		}
	case <-ctx.Done():
		t.Fatal("the JSON fetch never settled")
	}
	select {
	case code := <-posts:
		t.Errorf("the JSON fetch reached the endpoint (%d)", code)
	default:
	}
	if h.Mode() != hedge.On {
		t.Fatalf("mode %v after the other site's requests, want on", h.Mode())
	}
}
