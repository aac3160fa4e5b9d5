package hedgeset

import (
	"strings"
	"testing"

	"github.com/tailcut/hedge"
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
