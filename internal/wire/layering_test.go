package wire_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tailcut/hedge"

// The module's packages by side. A package belongs to a group when its
// path, relative to the module, is one of the group's or below one.
var (
	serverSide = []string{"spare", "tied", "loadreport", "dedup"}
	clients    = []string{"hedgehttp", "hedgegrpc", "hedgeredis", "hedgerueidis", "hedgepgx", "hedgesql"}
	exporters  = []string{"hedgeprom", "hedgeotel"}
	tools      = []string{"internal/sim", "internal/advise", "internal/bench", "internal/lab", "internal/drill", "internal/try"}
)

// in reports whether rel (a path relative to the module) is one of dirs
// or below one.
func in(rel string, dirs []string) bool {
	for _, d := range dirs {
		if rel == d || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// imports returns, for every package of the module, the module's
// packages it imports (not counting its tests), paths relative to the
// module ("" is the root package).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v (is the go command on PATH?)", err)
	}
	rel := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	m := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pkg, ok := rel(f[0])
		if !ok {
			continue
		}
		m[pkg] = []string{}
		for _, imp := range f[1:] {
			if r, ok := rel(imp); ok {
				m[pkg] = append(m[pkg], r)
			}
		}
	}
	return m
}

// violations returns the rules that the import graph m breaks, one line
// each.
func violations(m map[string][]string) []string {
	var bad []string
	pkgs := make([]string, 0, len(m))
	for p := range m {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		public := !strings.HasPrefix(p, "internal/") && !strings.HasPrefix(p, "cmd/") && !strings.HasPrefix(p, "examples/")
		for _, imp := range m[p] {
			switch {
			case in(p, serverSide) && in(imp, clients):
				bad = append(bad, p+" (server side) imports "+imp+" (a client transport): share the name through internal/wire")
			case in(p, clients) && in(imp, serverSide):
				bad = append(bad, p+" (a client transport) imports "+imp+" (server side): share the name through internal/wire, the tied client through internal/tiedclient")
			case in(p, exporters) && in(imp, clients):
				bad = append(bad, p+" (an exporter) imports "+imp+" (a client transport): take the stats it exports instead")
			case in(p, exporters) && in(imp, serverSide) && imp != "tied":
				bad = append(bad, p+" (an exporter) imports "+imp+": an exporter imports a server-side package only to export its stats (tied)")
			case p == "" && !strings.HasPrefix(imp, "internal/") && imp != "quantile":
				bad = append(bad, "the root package imports "+imp+": it may import only internal/* and quantile")
			case public && in(imp, tools):
				bad = append(bad, p+" (public) imports "+imp+", a tool behind cmd/hedge")
			}
		}
	}
	return bad
}

// TestLayering checks that the module's imports point one way: the
// server side and the client transports share wire names through
// internal/wire and import each other in neither direction; exporters
// import a server-side package only for the stats they export; the root
// package imports nothing of the module but internal packages and
// quantile; and no public package imports the tools behind cmd/hedge.
func TestLayering(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	m := imports(t)
	for _, p := range []string{"", "spare", "tied", "hedgehttp", "hedgegrpc", "hedgeprom"} {
		if _, ok := m[p]; !ok {
			t.Fatalf("go list did not list %q: the test reads the wrong module", module+"/"+p)
		}
	}
	for _, v := range violations(m) {
		t.Error(v)
	}
}

// TestLayeringRules checks that each rule of violations catches what it
// is for, on a made-up graph.
func TestLayeringRules(t *testing.T) {
	m := map[string][]string{
		"":                  {"internal/decide", "quantile", "hedgewatch"},
		"spare":             {"", "hedgehttp"},
		"tied/tiedgrpc":     {"tied", "hedgegrpc"},
		"hedgehttp":         {"", "tied"},
		"hedgesql":          {"dedup/deduppg"},
		"hedgeprom":         {"tied", "hedgewatch", "spare"},
		"hedgeotel":         {"hedgegrpc"},
		"hedgectl":          {"internal/sim"},
		"cmd/hedge":         {"internal/sim", "hedgehttp", "tied"},
		"internal/exactly":  {"hedgehttp", "dedup"},
		"loadreport":        {"", "internal/wire"},
		"dedup/dedupredis":  {"dedup"},
		"internal/tiedcopy": {"internal/wire"},
	}
	got := violations(m)
	want := []string{"the root package imports hedgewatch", "hedgectl", "hedgehttp", "hedgeotel", "hedgeprom", "hedgesql", "spare", "tied/tiedgrpc"}
	if len(got) != len(want) {
		t.Fatalf("violations: got %d:\n%s\nwant one each for %v", len(got), strings.Join(got, "\n"), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("violation %d: %q, want one about %s", i, got[i], w)
		}
	}
}
