package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// A bad --shards is refused with exit code 2, before any run, with a
// message that says what to do; so is an unknown study group.
func TestSimShardsValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--servers", "60", "--shards", "-1", "--fanout", "30"}, "shards = -1: use 0 or 1"},
		{[]string{"sim", "--servers", "64", "--shards", "30", "--fanout", "30"},
			"shards = 30 does not divide servers = 64 (2 per shard, 4 left over): every shard has servers/shards replicas; use servers = 60 (2 replicas each) or 90 (3 each)"},
		{[]string{"sim", "--servers", "20", "--shards", "30", "--fanout", "30"}, "every shard needs at least one server"},
		{[]string{"sim", "--servers", "60", "--shards", "30", "--fanout", "40"}, "use fanout = 30 (one leaf per shard) or a multiple of it"},
		{[]string{"sim", "--servers", "60", "--shards", "30"}, "shards = 30 with fanout = 1"},
		{[]string{"sim", "--servers", "60", "--shards", "30", "--fanout", "30", "--routing", "pool"}, "pool routing with shards"},
		{[]string{"study", "--groups", "shards,shard"}, `unknown study group "shard": use all or some of`},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != exitUsage {
			t.Errorf("%v: exit code %d, want %d (stderr %q)", tc.args, code, exitUsage, stderr)
		}
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: stderr %q does not contain %q", tc.args, stderr, tc.want)
		}
	}
}

// hedge sim --shards runs a sharded fan-out and says so.
func TestSimShardsRuns(t *testing.T) {
	code, out, errOut := runCLI("sim", "--world", "stalls", "--load", "0.3", "--servers", "12", "--shards", "4", "--fanout", "8",
		"--strategy", "default", "--fan-call", "--requests", "2000", "--runs", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "shards=4 replicas-per-shard=3") || !strings.Contains(out, "fan hedges/leaf") {
		t.Errorf("output does not describe the shards and the fan-out call:\n%s", out)
	}
	code, out, errOut = runCLI("sim", "--load", "0.3", "--servers", "12", "--shards", "4", "--fanout", "4", "--requests", "2000", "--runs", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if r["shards"] != 4.0 || r["servers"] != 12.0 {
		t.Errorf("shards %v, servers %v; want 4 and 12", r["shards"], r["servers"])
	}
}
