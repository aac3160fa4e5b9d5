package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tailcut/hedge/internal/sim"
)

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

var screenshots = flag.Bool("screenshots", false, "browser test: save docs/lab-explorer.png, lab-study.png, lab-drill.png and lab-advise.png")

// browser is a headless Chromium tab on a test lab server.
type browser struct {
	t   *testing.T
	ctx context.Context
	url string
}

// Hang guards of the browser test: they bound a stuck browser or page,
// and are far longer than any step takes on a loaded machine.
const (
	browserTimeout = 10 * time.Minute // the whole test
	conditionWait  = 3 * time.Minute  // one waitFor
)

// requireDeps reports whether the environment asks for the tests' external
// dependencies to be present (HEDGE_REQUIRE_DEPS=1, as CI sets it): a
// missing one then fails the test instead of skipping it.
func requireDeps() bool { return os.Getenv("HEDGE_REQUIRE_DEPS") == "1" }

// TestBrowser drives the served page in headless Chromium and checks what
// a person sees. It needs /usr/bin/chromium (apt-get install -y chromium)
// and is skipped without it, unless HEDGE_REQUIRE_DEPS=1, when it fails.
// A second lab serves a small study just run by sim.RunStudy, for the
// library default's line; the first serves the embedded study, which may
// not have run it. With -screenshots it saves the views to docs/.
func TestBrowser(t *testing.T) {
	exe := chromiumPath
	if p := os.Getenv("HEDGE_CHROMIUM"); p != "" {
		exe = p
	}
	if _, err := os.Stat(exe); err != nil {
		msg := fmt.Sprintf("browser tests need Chromium at %s (apt-get install -y chromium, or set HEDGE_CHROMIUM): %v", exe, err)
		if requireDeps() {
			t.Fatal(msg + " (HEDGE_REQUIRE_DEPS=1: not skipping)")
		}
		t.Skip(msg)
	}
	start := time.Now()
	// Small simulations keep the test quick, also under -race; the
	// screenshots show the lab's real default size.
	size := 20000
	if *screenshots {
		size = 0
	}
	s, err := New(Options{DefaultRequests: size, MaxConcurrent: 2, QueueWait: browserWait, Timeout: browserWait})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	ctx, cancelTime := context.WithTimeout(ctx, browserTimeout)
	defer cancelTime()
	if err := chromedp.Do(ctx); err != nil { // start the browser
		t.Fatalf("starting %s: %v", exe, err)
	}

	// Collect console errors and uncaught exceptions from the start.
	var mu sync.Mutex
	var consoleErrs []string
	msgs := chromedp.Console(ctx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() || m.Type == chromedp.ConsoleWarning {
				mu.Lock()
				consoleErrs = append(consoleErrs, m.String())
				mu.Unlock()
			}
		}
	}()

	// A second lab serves a study that ran the library default; the first
	// serves the embedded one, which may not have run it.
	s2, err := New(Options{DefaultRequests: size, MaxConcurrent: 2, QueueWait: browserWait, Timeout: browserWait, Study: newerStudy(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts2 := httptest.NewServer(s2)
	defer ts2.Close()

	b := &browser{t: t, ctx: ctx, url: ts.URL}
	t.Run("explorer", b.explorer)
	t.Run("keyboard tabs and study", b.study)
	t.Run("drill", b.drill)
	t.Run("advise", b.advise)
	t.Run("study with the library default", func(t *testing.T) { b.studyDefault(t, ts2.URL) })
	t.Run("every control has a label", func(t *testing.T) {
		b.t = t
		unlabelled := eval[[]string](b, `[...document.querySelectorAll('input, select, button')]
			.filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.getAttribute('aria-labelledby') && !e.textContent.trim())
			.map(e => e.outerHTML.slice(0, 80))`)
		for _, u := range unlabelled {
			t.Errorf("control without a label: %s", u)
		}
		if n := eval[int](b, `document.querySelectorAll('input, select, button').length`); n < 40 {
			t.Errorf("only %d controls found", n)
		}
	})

	cancelTime()
	<-consoleDone
	mu.Lock()
	defer mu.Unlock()
	refusals := 0
	for _, e := range consoleErrs {
		// The explorer step that types runs=9 provokes one 400 on purpose;
		// Chromium logs every 4xx response.
		if strings.Contains(e, "status of 400") && refusals == 0 {
			refusals++
			continue
		}
		t.Errorf("console: %s", e)
	}
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}

// browserWait is the browser test servers' wait for a slot and their
// time limit per request: the test is of the page, not of the server's
// load shedding (TestConcurrencyLimit, TestQueueWait and TestTimeout test
// that), so that a machine busy with other tests does not turn a slow
// simulation into a 503.
const browserWait = 2 * time.Minute

// do runs actions or fails the test.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// text returns the visible text of the element with the id.
func (b *browser) text(id string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`document.getElementById(%q).innerText`, id))
}

// waitFor waits until a JavaScript condition holds. The page itself
// checks it, at once and then after every change of the document or of
// the focus and on every animation frame, and one promise answers when
// it holds: nothing on this side sleeps or races a timer, and how long
// the page takes does not change the outcome. The deadline only bounds
// a hang.
func (b *browser) waitFor(what, cond string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, conditionWait)
	defer cancel()
	wait := fmt.Sprintf(`new Promise(resolve => {
		const holds = () => { try { return !!(%s); } catch (e) { return false; } };
		let done = false;
		const obs = new MutationObserver(check);
		function check() {
			if (done || !holds()) return;
			done = true;
			obs.disconnect();
			document.removeEventListener('focusin', check);
			resolve(true);
		}
		function frame() { check(); if (!done) requestAnimationFrame(frame); }
		obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
		document.addEventListener('focusin', check);
		frame();
	})`, cond)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](wait, chromedp.EvalAwaitPromise)); err != nil {
		state, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`['ex-verdict', 'ex-status', 'dr-preview', 'dr-p95', 'dr-time-out', 'ad-verdict', 'ad-error']
			.map(id => id + ': ' + document.getElementById(id).innerText.replace(/\s+/g, ' ')).join('\n')`))
		b.t.Fatalf("waiting for %s (%s): %v\npage state:\n%s", what, cond, err, state)
	}
}

// updates is how many explorer results the page has shown.
func (b *browser) updates() int {
	return eval[int](b, `+(document.getElementById('ex-results').dataset.updates || 0)`)
}

// waitUpdate waits for the explorer to show a result newer than n with
// nothing scheduled or in flight: data-pending is set synchronously by the
// input that schedules a (debounced) run and cleared only when the last
// scheduled run has answered, so no newer result can follow.
func (b *browser) waitUpdate(n int) {
	b.t.Helper()
	b.waitFor("an explorer update", fmt.Sprintf(`+(document.getElementById('ex-results').dataset.updates||0) > %d && document.getElementById('ex-results').dataset.pending === 'false'`, n))
}

func (b *browser) key(id string, keys ...string) {
	b.t.Helper()
	b.do(chromedp.Focus(chromedp.ID(id)))
	for _, k := range keys {
		b.do(chromedp.KeyEvent(k))
	}
}

func (b *browser) shot(name string) {
	b.t.Helper()
	if !*screenshots {
		return
	}
	b.do(chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join("..", "docs", name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("wrote %s", path)
}

func (b *browser) explorer(t *testing.T) {
	b.t = t
	b.do(chromedp.Navigate(b.url + "/#explorer"))
	b.waitUpdate(0)
	// The page leads with the library's default: its first preset, its
	// strategy chosen, its result shown, and the address keeps it.
	if st := eval[string](b, `document.querySelector('input[name="strategy"]:checked').value`); st != "default" {
		t.Errorf("the page opens on strategy %q, want the library default", st)
	}
	if first := eval[string](b, `document.querySelector('[data-preset]').textContent`); first != "Library default" {
		t.Errorf("the first preset is %q, want the library default", first)
	}
	if c := b.text("ex-caption-hedged"); !strings.Contains(c, "library default") {
		t.Errorf("opening caption %q, want the library default", c)
	}
	if u := eval[string](b, `location.search`); !strings.Contains(u, "strategy=default") || !strings.Contains(u, "load=0.5") {
		t.Errorf("the address keeps %q, want the opening scenario", u)
	}
	if s := b.text("ex-status"); !strings.Contains(s, ",000 requests") {
		t.Errorf("status %q does not state the simulation size", s)
	}
	b.shot("lab-explorer.png")

	// A fixed p95 delay, a preset away: a gain on the quiet-day p95.
	n := b.updates()
	b.do(chromedp.Click(chromedp.CSS(`[data-preset="p95"]`)))
	b.waitUpdate(n)
	if v := b.text("ex-verdict-title"); !strings.Contains(v, "Worth it") {
		t.Errorf("p95 preset's verdict %q, want a gain at the quiet-day p95", v)
	}
	p99 := b.text("ex-table")

	// Keyboard only: move the utilisation slider with the arrow keys.
	n = b.updates()
	b.key("ex-load", kb.ArrowRight, kb.ArrowRight)
	b.waitUpdate(n)
	if out := b.text("ex-load-out"); out != "60%" {
		t.Errorf("after two ArrowRight presses the load reads %q, want 60%%", out)
	}
	if after := b.text("ex-table"); after == p99 {
		t.Errorf("numbers did not change when the slider moved:\n%s", after)
	}

	// A mouse click on the tail-heaviness slider's far end changes sigma.
	n = b.updates()
	box, err := chromedp.Run(b.ctx, chromedp.Dimensions(chromedp.ID("ex-sigma")))
	if err != nil {
		t.Fatal(err)
	}
	q := box.Content
	b.do(chromedp.MouseClickXY((q[0]+q[2])/2+(q[2]-q[0])*0.3, (q[1]+q[5])/2))
	b.waitUpdate(n)
	if out := b.text("ex-sigma-out"); out == "σ 1.0" {
		t.Errorf("clicking the sigma slider left it at %q", out)
	}

	// Cancellation off at high utilisation: the collapse warning.
	n = b.updates()
	b.do(chromedp.Click(chromedp.ID("ex-cancel")))
	b.key("ex-load", kb.ArrowRight, kb.ArrowRight, kb.ArrowRight, kb.ArrowRight, kb.ArrowRight) // 60% -> 85%
	b.waitUpdate(n)
	if out := b.text("ex-load-out"); out != "85%" {
		t.Errorf("load reads %q, want 85%%", out)
	}
	b.waitFor("the collapse verdict", `document.getElementById('ex-verdict').dataset.tone === 'collapse'`)
	if w := b.text("ex-warnings"); !strings.Contains(w, "Warning") || !strings.Contains(w, "worse with hedging") {
		t.Errorf("collapse warning missing: %q", w)
	}
	if h := b.text("ex-headsup"); !strings.Contains(h, "Cancellation is off above 60% utilisation") {
		t.Errorf("rule-based heads-up missing: %q", h)
	}
	if v := b.text("ex-verdict-title"); !strings.Contains(v, "Collapse") {
		t.Errorf("verdict %q", v)
	}

	// A bad value typed into a field gets the server's reason, not a hang.
	n = b.updates()
	b.do(chromedp.SetValue(chromedp.ID("ex-runs"), "9"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('ex-runs').dispatchEvent(new Event('input', {bubbles: true}))`))
	b.waitFor("the refusal", `document.getElementById('ex-status').classList.contains('err')`)
	if s := b.text("ex-status"); !strings.Contains(s, "runs: 9 is out of range") {
		t.Errorf("status after runs=9: %q", s)
	}

	// Back to the p95 settings with a preset button.
	b.do(chromedp.SetValue(chromedp.ID("ex-runs"), "2"), chromedp.Click(chromedp.CSS(`[data-preset="p95"]`)))
	b.waitUpdate(n)
	b.waitFor("the good verdict again", `document.getElementById('ex-verdict').dataset.tone === 'good'`)

	// The library default: its one-line description, a result, and the
	// mean delay in force.
	if !eval[bool](b, `document.getElementById('ex-default-sub').hidden`) {
		t.Error("the library default's description shows while another strategy is chosen")
	}
	n = b.updates()
	b.do(chromedp.Click(chromedp.CSS(`input[name="strategy"][value="default"]`)))
	b.waitUpdate(n)
	if hint := b.text("ex-default-sub"); !strings.Contains(hint, "zero Config") {
		t.Errorf("library default described as %q", hint)
	}
	if c := b.text("ex-caption-hedged"); !strings.Contains(c, "library default") {
		t.Errorf("table caption %q, want the library default", c)
	}
	if d := b.text("ex-delayout"); !strings.Contains(d, "primary latencies") || !strings.Contains(d, "on average") {
		t.Errorf("delay card %q, want the mean live delay", d)
	}
	if v := eval[string](b, `document.getElementById('ex-verdict').dataset.tone`); v == "" || v == "baseline" {
		t.Errorf("library default verdict tone %q", v)
	}

	// Ten clients, then the servers' help: both reach the simulation.
	n = b.updates()
	b.do(chromedp.Click(chromedp.CSS(`[data-preset="manyclients"]`)))
	b.waitUpdate(n)
	if c := eval[string](b, `document.getElementById('ex-clients').value`); c != "10" {
		t.Errorf("the ten-clients preset left clients at %q", c)
	}
	n = b.updates()
	b.do(chromedp.SetValue(chromedp.ID("ex-help"), "low-priority"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('ex-help').dispatchEvent(new Event('change', {bubbles: true}))`))
	b.waitUpdate(n)
	if eval[bool](b, `document.getElementById('ex-status').classList.contains('err')`) {
		t.Errorf("low-priority copies refused: %q", b.text("ex-status"))
	}
	n = b.updates()
	b.do(chromedp.Click(chromedp.CSS(`[data-preset="default"]`)))
	b.waitUpdate(n)
	if h := eval[string](b, `document.getElementById('ex-help').value`); h != "none" {
		t.Errorf("the opening preset left the servers' help at %q", h)
	}

	b.scenarioURL(t)

	// A fan-out of 40: the preset sets the width, the page lowers the
	// requests to fit the lab's limit on leaves, and the leaves' numbers
	// show beside the requests'.
	if !eval[bool](b, `document.getElementById('ex-fan').hidden && document.getElementById('ex-fan-sub').hidden`) {
		t.Error("the fan-out's results or controls show without a fan-out")
	}
	n = b.updates()
	b.do(chromedp.Click(chromedp.CSS(`[data-preset="fanout"]`)))
	b.waitUpdate(n)
	if eval[bool](b, `document.getElementById('ex-status').classList.contains('err')`) {
		t.Fatalf("the fan-out preset refused: %q", b.text("ex-status"))
	}
	if w := b.text("ex-width-out"); w != "40 leaves" || eval[bool](b, `document.getElementById('ex-fan-sub').hidden`) {
		t.Errorf("width reads %q; need and the fan-out call hidden: %v", w, eval[bool](b, `document.getElementById('ex-fan-sub').hidden`))
	}
	if s := b.text("ex-status"); !strings.Contains(s, "2 × 5,000 requests of 40 leaves") {
		t.Errorf("status %q, want 2 runs of 5,000 requests of 40 leaves (400,000 leaves a point)", s)
	}
	if eval[bool](b, `document.getElementById('ex-fan').hidden`) {
		t.Fatal("no fan-out results after the fan-out preset")
	}
	if cells := eval[[]string](b, `[...document.querySelectorAll('#ex-fan-table td')].map(td => td.textContent)`); len(cells) != 18 || slices.Contains(cells, "–") {
		t.Errorf("fan-out table cells %q, want 18 filled", cells)
	}
	if c := b.text("ex-copies"); !strings.HasPrefix(c, "Copies per request\n40 → ") {
		t.Errorf("copies per request %q, want 40 unhedged", c)
	}
	if eval[bool](b, `document.getElementById('ex-fanextra').hidden || document.getElementById('ex-fanpeak').hidden`) {
		t.Error("the fan-out call's numbers are hidden with the call on")
	}
	if v := b.text("ex-verdict-text"); !strings.Contains(v, "all 40 of its leaves") {
		t.Errorf("verdict %q says nothing of the fan-out", v)
	}
	// Without the fan-out call its numbers go; at width 1 the fan-out's
	// results go.
	n = b.updates()
	b.do(chromedp.Click(chromedp.ID("ex-fancall")))
	b.waitUpdate(n)
	if !eval[bool](b, `document.getElementById('ex-fanextra').hidden`) || eval[bool](b, `document.getElementById('ex-fan').hidden`) {
		t.Error("the fan-out call's numbers show without the call")
	}
	n = b.updates()
	b.key("ex-width", kb.Home)
	b.waitUpdate(n)
	if !eval[bool](b, `document.getElementById('ex-fan').hidden`) || b.text("ex-width-out") != "1: no fan-out" {
		t.Errorf("width 1 (%q) still shows the fan-out's results", b.text("ex-width-out"))
	}
}

// scenarioURL checks that the address bar carries a scenario: an address
// with one opens it, with the delay in milliseconds; a change is written
// back; and the address written opens the same scenario again.
func (b *browser) scenarioURL(t *testing.T) {
	// Each address opens a fresh page: from about:blank, since an address
	// that differs from the current one only by its fragment would not
	// load again.
	b.do(chromedp.Navigate("about:blank"), chromedp.Navigate(b.url+"/?world=stalls&load=0.3&routing=two-choice&strategy=fixed&delay=5ms&runs=2#explorer"))
	b.waitUpdate(0)
	form := `JSON.stringify(Object.fromEntries([...new FormData(document.getElementById('ex-form'))]
		.concat([...document.querySelectorAll('#ex-form input[type=checkbox]')].map(i => [i.name, i.checked]))))`
	got := map[string]any{}
	if err := json.Unmarshal([]byte(eval[string](b, form)), &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"world": "stalls", "load": "0.3", "routing": "two-choice", "strategy": "fixed", "delay": "5ms", "cancel": true} {
		if got[k] != want {
			t.Errorf("the address's scenario set %s to %v, want %v", k, got[k], want)
		}
	}
	if eval[bool](b, `document.getElementById('ex-status').classList.contains('err')`) {
		t.Fatalf("the address's scenario refused: %q", b.text("ex-status"))
	}
	if c := b.text("ex-caption-hedged"); !strings.Contains(c, "fixed 5") {
		t.Errorf("caption %q, want a fixed delay of 5 (5ms)", c)
	}
	// A change is written to the address at once.
	n := b.updates()
	b.key("ex-load", kb.ArrowRight)
	b.waitUpdate(n)
	u := eval[string](b, `location.href`)
	if !strings.Contains(u, "load=0.35") || !strings.Contains(u, "delay=5ms") || !strings.Contains(u, "world=stalls") || !strings.HasSuffix(u, "#explorer") {
		t.Errorf("after a change the address is %q, want the scenario with load 0.35", u)
	}
	before := eval[string](b, form)
	b.do(chromedp.Navigate("about:blank"), chromedp.Navigate(u))
	b.waitUpdate(0)
	if after := eval[string](b, form); after != before {
		t.Errorf("the written address opened\n%s\nwhere the page had\n%s", after, before)
	}
	if v := eval[string](b, `location.href`); v != u {
		t.Errorf("the address %q became %q on opening", u, v)
	}
}

func (b *browser) study(t *testing.T) {
	b.t = t
	// Keyboard: from the Explorer tab, ArrowRight selects Study.
	b.key("tab-explorer", kb.ArrowRight)
	b.waitFor("the study tab", `document.getElementById('tab-study').getAttribute('aria-selected') === 'true' && !document.getElementById('view-study').hidden && document.activeElement.id === 'tab-study'`)
	b.waitFor("the study plot", `document.querySelectorAll('#st-ratio circle').length > 30`)
	if title := b.text("st-ratio-title"); !strings.HasPrefix(title, "p99 ratio") {
		t.Errorf("noise title %q", title)
	}
	b.do(chromedp.Click(chromedp.CSS(`input[name="st-world"][value="stalls"] + span`)))
	b.waitFor("the stalls plot", `document.getElementById('st-ratio-title').textContent.startsWith('p99.9')`)
	if note := b.text("st-note"); !strings.Contains(note, "worse") {
		t.Errorf("stalls note should name the quiet-day collapse: %q", note)
	}
	b.shot("lab-study.png")
	// The embedded study may not have run the library default: its series
	// is then offered but disabled.
	has := bytes.Contains(EmbeddedStudy(), []byte(`"strategy": "default"`)) || bytes.Contains(EmbeddedStudy(), []byte(`"strategy":"default"`))
	if off := eval[bool](b, `document.querySelector('input[data-series="default"]').disabled`); off == has {
		t.Errorf("library default series disabled %v, with default rows in the study %v", off, has)
	}
}

// studyDefault opens the study view of a lab whose results.json has the
// library default's rows: its line and table rows are shown.
func (b *browser) studyDefault(t *testing.T, url string) {
	b.t = t
	b.do(chromedp.Navigate(url + "/#study"))
	b.waitFor("the study plot", `document.querySelectorAll('#st-ratio circle').length > 0`)
	if on := eval[bool](b, `(c => !c.disabled && c.checked)(document.querySelector('input[data-series="default"]'))`); !on {
		t.Error("library default series not offered")
	}
	if n := eval[int](b, `[...document.querySelectorAll('#st-table tbody th')].filter(th => th.textContent === 'library default').length`); n != 2 {
		t.Errorf("%d library default rows in the table, want one per load (2)", n)
	}
	if n := eval[int](b, `document.querySelectorAll('#st-ratio path[stroke="#333333"]').length`); n != 1 {
		t.Errorf("%d library default lines in the ratio plot, want 1", n)
	}
	if d := eval[string](b, `document.getElementById('st-ratio-desc').textContent`); !strings.Contains(d, "library default") {
		t.Errorf("ratio plot description %q", d)
	}
}

// newerStudy returns a small results.json written by sim.RunStudy, which
// runs the library default: one run of 2,000 requests per point at loads
// 0.3 and 0.7.
func newerStudy(t *testing.T) []byte {
	t.Helper()
	pts, err := sim.RunStudy(context.Background(), sim.StudyOptions{Seed: 1, Workers: 2, Runs: 1, Requests: 2000, Loads: []float64{0.3, 0.7}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pts, func(p sim.PointResult) bool { return p.Strategy == "default" }) {
		t.Fatal("the study ran no library default point")
	}
	b, err := json.Marshal(pts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) drill(t *testing.T) {
	b.t = t
	b.key("tab-study", kb.ArrowRight)
	b.waitFor("the drill", `document.getElementById('dr-preview').dataset.outcome === 'EXCESS LOAD'`)
	check := func(outcome, p95 string, more ...string) {
		t.Helper()
		cond := fmt.Sprintf(`document.getElementById('dr-preview').dataset.outcome === %q && document.getElementById('dr-p95').innerText.includes(%q)`, outcome, p95)
		for _, m := range more {
			cond += fmt.Sprintf(` && document.getElementById('view-drill').innerText.includes(%q)`, m)
		}
		b.waitFor(outcome+" "+strings.Join(more, ", "), cond)
		if got := b.text("dr-outcome"); got != outcome {
			t.Errorf("outcome badge %q, want %q", got, outcome)
		}
		if got := b.text("dr-p95"); !strings.Contains(got, p95) {
			t.Errorf("%s: p95 card %q, want %s", outcome, got, p95)
		}
		all := b.text("view-drill")
		for _, m := range more {
			if !strings.Contains(all, m) {
				t.Errorf("%s: page lacks %q", outcome, m)
			}
		}
	}
	// Opens at 50 ms, 100% budget.
	check("EXCESS LOAD", "146 ms", "+100%", "20 hedges")
	// Keyboard: eight ArrowRight presses take the delay from 50 to 130 ms.
	b.key("dr-delay", kb.ArrowRight, kb.ArrowRight, kb.ArrowRight, kb.ArrowRight, kb.ArrowRight, kb.ArrowRight, kb.ArrowRight, kb.ArrowRight)
	check("TAIL CUT", "226 ms", "640 ms to 226 ms for 15% extra", "3 hedges: 6, 12, 17", "684 ms")

	// Replay: Play moves the clock; Next event steps; Restart rewinds.
	b.do(chromedp.Click(chromedp.ID("dr-play")))
	b.waitFor("playback", `parseFloat(document.getElementById('dr-time-out').textContent) > 20`)
	b.do(chromedp.Click(chromedp.ID("dr-play"))) // pause
	b.do(chromedp.Click(chromedp.ID("dr-restart")))
	b.waitFor("rewind", `document.getElementById('dr-time-out').textContent === '0 ms'`)
	for range 21 {
		b.do(chromedp.Click(chromedp.ID("dr-next")))
	}
	if cur := eval[string](b, `document.querySelector('#dr-trace li.current').innerText`); !strings.Contains(cur, "primary answers") {
		t.Errorf("21st event %q, want the first answer", cur)
	}
	// Seek with the slider to 226 ms: request 12's backup has won.
	b.do(chromedp.SetValue(chromedp.ID("dr-time"), "226"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('dr-time').dispatchEvent(new Event('input', {bubbles: true}))`))
	if cur := eval[string](b, `document.querySelector('#dr-trace li.current').innerText`); !strings.Contains(cur, "#12") {
		t.Errorf("event at 226 ms %q, want request 12", cur)
	}
	if speeds := eval[string](b, `[...document.getElementById('dr-speed').options].map(o => o.value).join(' ')`); speeds != "0.25 0.5 1 1.5 2" {
		t.Errorf("speeds %q", speeds)
	}
	b.shot("lab-drill.png")

	b.do(chromedp.Click(chromedp.CSS(`input[name="op"][value="write"]`)))
	check("DUPLICATE WRITES", "226 ms", "requests 6, 12, 17 wrote twice")
	b.do(chromedp.Click(chromedp.CSS(`input[name="op"][value="write-key"]`)))
	check("TAIL CUT", "226 ms", "3 second commits deduplicated")
	b.do(chromedp.Click(chromedp.CSS(`input[name="op"][value="read"]`)), chromedp.Click(chromedp.ID("dr-cancel")))
	check("TAIL CUT", "226 ms", "1990 ms")
	b.do(chromedp.Click(chromedp.ID("dr-cancel")), chromedp.Click(chromedp.CSS(`[data-drill="budget"]`)))
	check("NO TAIL GAIN", "640 ms", "requests 1 and 2")
	b.do(chromedp.Click(chromedp.CSS(`[data-drill="50"]`)))
	check("EXCESS LOAD", "146 ms")
	// Each check below differs from the state before it, so that it
	// cannot pass on a result from before the key press.
	b.key("dr-delay", kb.End)
	check("NO TAIL GAIN", "640 ms", "no hedges") // 1000 ms: nothing outlives it
	b.key("dr-delay", kb.Home)
	check("EXCESS LOAD", "96 ms", "20 hedges") // delay 0 hedges everything
}

// Without Chromium the browser test skips for a developer, and fails when
// HEDGE_REQUIRE_DEPS=1 (CI), so that a green run cannot hide it. The test
// binary runs TestBrowser in a child process, with Chromium pointed at a
// path that does not exist.
func TestBrowserRequireDeps(t *testing.T) {
	for _, tc := range []struct {
		require  string
		fail     bool
		contains string
	}{
		{"", false, "--- SKIP: TestBrowser"},
		{"0", false, "--- SKIP: TestBrowser"},
		{"1", true, "--- FAIL: TestBrowser"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBrowser$", "-test.v")
		cmd.Env = append(os.Environ(), "HEDGE_CHROMIUM="+os.DevNull+"/missing", "HEDGE_REQUIRE_DEPS="+tc.require)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if failed := errors.As(err, &exit); failed != tc.fail || (err != nil && !failed) {
			t.Errorf("HEDGE_REQUIRE_DEPS=%q: %v, want failure %v:\n%s", tc.require, err, tc.fail, out)
		}
		if !strings.Contains(string(out), tc.contains) || !strings.Contains(string(out), "apt-get install -y chromium") {
			t.Errorf("HEDGE_REQUIRE_DEPS=%q: output lacks %q and the install hint:\n%s", tc.require, tc.contains, out)
		}
	}
}

// advise pastes 2,000 latencies with a slow tail into the Advise view
// and checks the verdict, the report and the chart (an image, not markup).
func (b *browser) advise(t *testing.T) {
	b.t = t
	// Keyboard: from the Drill tab, ArrowRight selects Advise.
	b.key("tab-drill", kb.ArrowRight)
	b.waitFor("the advise tab", `document.getElementById('tab-advise').getAttribute('aria-selected') === 'true' && !document.getElementById('view-advise').hidden`)
	// Nothing given: the page says so without asking the server.
	b.do(chromedp.Click(chromedp.ID("ad-run")))
	b.waitFor("the empty-input message", `document.getElementById('ad-error').textContent.includes('paste latencies first')`)
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('ad-paste').value =
		Array.from({length: 2000}, (_, i) => (10 + (i * 7919 % 1000) / 250 * (i % 50 === 0 ? 25 : 1)).toFixed(3) + 'ms').join('\n')`),
		chromedp.SetValue(chromedp.ID("ad-pcts"), "90,95,99"),
		chromedp.Click(chromedp.ID("ad-run")))
	b.waitFor("the report", `!document.getElementById('ad-out').hidden`)
	if v := b.text("ad-verdict"); !strings.HasPrefix(v, "The library's default") || !strings.Contains(v, "Recommended: a fixed delay") {
		t.Errorf("verdict %q, want the default first, then a recommendation for a 2%% tail", v)
	}
	if badge := b.text("ad-badge"); !strings.HasPrefix(badge, "HEDGE AT P") {
		t.Errorf("badge %q", badge)
	}
	if r := b.text("ad-report"); !strings.Contains(r, "Sample: 2000 latencies") || !strings.Contains(r, "Recommendation") {
		t.Errorf("report:\n%s", r)
	}
	if src := eval[string](b, `document.getElementById('ad-chart').src.slice(0, 26)`); src != "data:image/svg+xml;charset" {
		t.Errorf("chart src starts %q, want a data: URL", src)
	}
	if ok := eval[bool](b, `document.getElementById('ad-chart').complete && document.getElementById('ad-chart').naturalWidth > 0`); !ok {
		t.Error("the chart image did not load")
	}
	if n := eval[int](b, `document.querySelectorAll('#view-advise svg').length`); n != 0 {
		t.Errorf("%d svg elements in the advise view: the chart must be an image", n)
	}
	if e := b.text("ad-error"); e != "" {
		t.Errorf("error shown after a good run: %q", e)
	}
	b.shot("lab-advise.png")
	// The objective and the replicas reach the analysis: the page's own
	// POST passes the lab's cross-origin check.
	b.do(chromedp.SetValue(chromedp.ID("ad-objective"), "p99.9"),
		chromedp.Click(chromedp.CSS(`#ad-form details.adv summary`)),
		chromedp.SetValue(chromedp.ID("ad-replicas"), "3"),
		chromedp.SetValue(chromedp.ID("ad-concurrency"), "2"),
		chromedp.Click(chromedp.ID("ad-run")))
	b.waitFor("the report judged by the p99.9", `document.getElementById('ad-report').textContent.includes('judged by the p99.9')`)
	if e := b.text("ad-error"); e != "" {
		t.Errorf("error shown after a run judged by the p99.9: %q", e)
	}
}
