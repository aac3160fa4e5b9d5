package lab

import (
	"strings"
	"testing"
)

// The cache is bounded in bytes as well as entries: the least recently
// used entries go until both limits hold, and a value larger than the
// byte limit is not kept at all.
func TestCacheBytes(t *testing.T) {
	c := newCache(100, 2000)
	val := strings.Repeat("x", 500) // footprint 516: the string header and its bytes
	for _, k := range []string{"a", "b", "c"} {
		c.put(k, val)
	}
	if n, b := c.stats(); n != 3 || b != 3*(1+footprint(val)) {
		t.Fatalf("three entries: %d entries, %d bytes", n, b)
	}
	c.get("a") // b is now the least recently used
	c.put("d", val)
	if _, ok := c.get("b"); ok {
		t.Error("b kept past the byte limit")
	}
	for _, k := range []string{"a", "c", "d"} {
		if _, ok := c.get(k); !ok {
			t.Errorf("%s evicted", k)
		}
	}
	c.put("d", "small") // replacing an entry gives its bytes back
	if n, b := c.stats(); n != 3 || b != 2*(1+footprint(val))+1+footprint("small") {
		t.Errorf("after replacing d: %d entries, %d bytes", n, b)
	}
	c.put("huge", strings.Repeat("x", 5000))
	if _, ok := c.get("huge"); ok {
		t.Error("a value over the byte limit was cached")
	}
	if n, b := c.stats(); n != 3 || b > 2000 {
		t.Errorf("after the huge value: %d entries, %d bytes", n, b)
	}
}

// footprint counts the backing arrays a cached explorer result refers to.
func TestFootprint(t *testing.T) {
	if got, want := footprint([]float64{1, 2, 3}), 24+3*8; got != want {
		t.Errorf("footprint([]float64 of 3) = %d, want %d", got, want)
	}
	type inner struct {
		S  string
		Xs []float64
	}
	v := struct {
		In  []inner
		Arr [2]string
	}{In: make([]inner, 1, 2), Arr: [2]string{"ab", "cde"}}
	v.In[0] = inner{S: "hello", Xs: make([]float64, 4)}
	want := 24 + 2*16 + // the struct: a slice header and two string headers
		2*(16+24) + // the slice's backing array, capacity 2
		5 + 4*8 + // the inner string and floats
		2 + 3 // the array's strings
	if got := footprint(v); got != want {
		t.Errorf("footprint = %d, want %d", got, want)
	}
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.parseExplore(small)
	r, err := s.explore(t.Context(), p, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := footprint(r); n < 2000 || n > 64<<10 {
		t.Errorf("an explorer result's footprint is %d bytes: want a few kilobytes", n)
	}
}
