package rediscmd

import "testing"

func TestReadOp(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   string
		read bool
	}{
		{"get", "GET", true},
		{"GeT", "GET", true},
		{"ZRANGE", "ZRANGE", true},
		{"set", "", false},
		{"pfcount", "", false},
		{"scan", "", false},
		{"get-but-much-longer-than-any-command", "", false},
		{"", "", false},
	} {
		if op, read := ReadOp(tc.name); op != tc.op || read != tc.read {
			t.Errorf("ReadOp(%q) = %q, %v; want %q, %v", tc.name, op, read, tc.op, tc.read)
		}
		if op, read := ReadOp([]byte(tc.name)); op != tc.op || read != tc.read {
			t.Errorf("ReadOp([]byte(%q)) = %q, %v; want %q, %v", tc.name, op, read, tc.op, tc.read)
		}
	}
	for _, name := range reads {
		if len(name) >= maxNameLen {
			t.Errorf("%s is longer than maxNameLen", name)
		}
	}
	got := Reads()
	got[0] = "SET"
	if _, ok := ReadOp("SET"); ok {
		t.Errorf("Reads returned the allow-list itself")
	}
}

func TestReadOpDoesNotAllocate(t *testing.T) {
	name := []byte("hgetall")
	if n := testing.AllocsPerRun(100, func() { ReadOp(name) }); n != 0 {
		t.Errorf("ReadOp allocates %v times", n)
	}
}
