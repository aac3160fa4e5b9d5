package rowscan

import "testing"

func TestScan(t *testing.T) {
	var a int
	var b string
	for _, d := range []any{5, (*int)(nil)} {
		if _, ok := ElemType(d); ok {
			t.Errorf("ElemType(%#v) accepted", d)
		}
	}
	dest := []any{&a, nil, &b}
	types := make(Types, len(dest))
	for i, d := range dest {
		tp, ok := ElemType(d)
		if !ok {
			t.Fatalf("ElemType(dest[%d]) refused", i)
		}
		types[i] = tp
	}
	ptrs, args := types.New()
	if args[1] != nil {
		t.Fatalf("args[1] = %v for a skipped column", args[1])
	}
	*args[0].(*int) = 7
	*args[2].(*string) = "x"
	if a != 0 || b != "" {
		t.Fatal("New's values alias dest")
	}
	Set(dest, ptrs)
	if a != 7 || b != "x" {
		t.Fatalf("after Set: %d %q, want 7 \"x\"", a, b)
	}
}
