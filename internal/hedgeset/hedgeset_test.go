package hedgeset

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/tied"
)

func TestSort(t *testing.T) {
	a, _ := hedge.New(hedge.Config{})
	b, _ := hedge.New(hedge.Config{})
	list, errs := Sort(map[string]*hedge.Hedger{"b": b, "a": a})
	if len(errs) != 0 || len(list) != 2 || list[0].Name != "a" || list[0].H != a || list[1].Name != "b" {
		t.Fatalf("Sort = %v, %v", list, errs)
	}
	_, errs = Sort(map[string]*hedge.Hedger{"": a, "x": nil, "\xff": b, "c": b})
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"empty name", `"x" is nil`, "not valid UTF-8", "same *hedge.Hedger"} {
		if !strings.Contains(all, want) {
			t.Errorf("mistakes %q lack %q", all, want)
		}
	}
	if _, errs := Sort(nil); len(errs) != 1 {
		t.Errorf("Sort(nil) = %v, want one mistake", errs)
	}
}

// distinct returns a value of S whose numeric and boolean fields hold
// distinct values (a bool true), and the value of each field by name.
func distinct[S any](t *testing.T, skip ...string) (S, map[string]int64) {
	t.Helper()
	var s S
	v := reflect.ValueOf(&s).Elem()
	want := map[string]int64{}
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		if slices.Contains(skip, name) {
			continue
		}
		n := int64(1000 + 17*i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(n)
		case reflect.Bool:
			f.SetBool(true)
			n = 1
		default:
			t.Fatalf("%T.%s is a %s: export it, or skip it here", s, name, f.Type())
		}
		want[name] = n
	}
	return s, want
}

// checkCovers checks that series export every field of S given by want,
// each once, and nothing else.
func checkCovers[S any](t *testing.T, series []Series[S], s S, want map[string]int64) {
	t.Helper()
	got := map[int64]int{}
	names := map[string]bool{}
	for _, sr := range series {
		if names[sr.Name] {
			t.Errorf("series %q twice", sr.Name)
		}
		names[sr.Name] = true
		if sr.Help == "" || sr.Unit == "" {
			t.Errorf("series %q without help or unit", sr.Name)
		}
		for _, v := range sr.Values(s) {
			if (v.Label == "") != (sr.Label == "") {
				t.Errorf("series %q: label value %q with label %q", sr.Name, v.Label, sr.Label)
			}
			got[v.N]++
		}
	}
	bools := 0
	for name, n := range want {
		if n == 1 {
			bools++
			continue
		}
		if got[n] != 1 {
			t.Errorf("field %s exported %d times, want once", name, got[n])
		}
	}
	if got[1] != bools {
		t.Errorf("boolean fields exported %d times, want %d", got[1], bools)
	}
	if total := len(want); func() int {
		n := 0
		for _, c := range got {
			n += c
		}
		return n
	}() != total {
		t.Errorf("%d values exported for %d fields", len(got), total)
	}
}

// TestSeriesCoverEveryField: every field of the stats of tied clients,
// tied servers and replicas is exported by exactly one series, so that a
// field added to one of them fails here until an exporter exports it.
func TestSeriesCoverEveryField(t *testing.T) {
	cs, cw := distinct[tied.ClientStats](t)
	checkCovers(t, TiedClientSeries, cs, cw)
	ss, sw := distinct[tied.Stats](t)
	checkCovers(t, TiedServerSeries, ss, sw)
	rs, rw := distinct[hedge.ReplicaStats](t, "Replica", "Name", "Latency", "Recent") // the label, ReplicaLatency and ReplicaRecent
	checkCovers(t, ReplicaSeries, rs, rw)
	ss2, sw2 := distinct[hedge.ShardStats](t, "Shard") // the label
	checkCovers(t, ShardSeries, ss2, sw2)
	if ReplicaLabel(12) != "12" {
		t.Errorf("ReplicaLabel(12) = %q", ReplicaLabel(12))
	}
}

func TestSortItems(t *testing.T) {
	a, b := new(int), new(int)
	list, errs := SortItems(TiedClientKind, []Item[int]{{"b", b}, {"a", a}})
	if len(errs) != 0 || len(list) != 2 || list[0].Name != "a" || list[0].V != a {
		t.Fatalf("SortItems = %v, %v", list, errs)
	}
	_, errs = SortItems(TiedServerKind, []Item[int]{{"", a}, {"x", nil}, {"\xff", b}, {"c", b}, {"d", new(int)}, {"d", new(int)}})
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		`WithTiedServer("", ...): the name is empty`,
		`WithTiedServer("x", nil): pass the *tied.Server made with tied.NewServer`,
		`WithTiedServer("\xff", ...): the name is not valid UTF-8`,
		`tied server "c" and "\xff" are the same *tied.Server`,
		`WithTiedServer("d", ...) is given more than once`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("mistakes %q lack %q", all, want)
		}
	}
	if len(errs) != 5 {
		t.Errorf("%d mistakes, want 5: %q", len(errs), all)
	}
}

// TestShardRows: the shards beyond the cap are summed under "other", so
// that an exporter's label values stay bounded.
func TestShardRows(t *testing.T) {
	shards := make([]hedge.ShardStats, 5)
	for i := range shards {
		n := int64(i + 1)
		shards[i] = hedge.ShardStats{Shard: i, Leaves: 10 * n, Hedges: n, HedgeWins: n, Stragglers: 2 * n, Failures: 3 * n}
	}
	rows := ShardRows(shards, 3)
	if len(rows) != 4 || rows[0].Label != "0" || rows[2].Label != "2" || rows[2].S != shards[2] || rows[3].Label != ShardOther {
		t.Fatalf("ShardRows(5 shards, 3) = %+v", rows)
	}
	if o := rows[3].S; o.Leaves != 90 || o.Hedges != 9 || o.HedgeWins != 9 || o.Stragglers != 18 || o.Failures != 27 {
		t.Errorf("other = %+v, want shards 3 and 4 summed", o)
	}
	if rows := ShardRows(shards, 5); len(rows) != 5 || rows[4].Label != "4" {
		t.Errorf("ShardRows(5 shards, 5) = %+v, want every shard under its index", rows)
	}
	if rows := ShardRows(shards, 0); len(rows) != 1 || rows[0].Label != ShardOther || rows[0].S.Leaves != 150 {
		t.Errorf("ShardRows(5 shards, 0) = %+v, want one row of all", rows)
	}
	if rows := ShardRows(nil, 3); len(rows) != 0 {
		t.Errorf("ShardRows(nil, 3) = %+v", rows)
	}
}
