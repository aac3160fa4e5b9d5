package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// A cluster of 3 masters with a replica each: every slot served, each
// node where the layout says, a key's slot as the server computes it, a
// write on the master readable on its replica, and every pid gone after
// Stop.
func TestCluster(t *testing.T) {
	Need(t)
	c, err := StartClusterN(ClusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Shards) != 3 || len(c.Nodes) != 6 {
		t.Fatalf("%d shards, %d nodes; want 3 and 6", len(c.Shards), len(c.Nodes))
	}
	seen := map[*Server]bool{}
	for i, sh := range c.Shards {
		if len(sh.Replicas) != 1 {
			t.Fatalf("shard %d has %d replicas, want 1", i, len(sh.Replicas))
		}
		for _, s := range sh.Servers() {
			if seen[s] {
				t.Fatalf("node %s is in two shards", s.Addr)
			}
			seen[s] = true
		}
		role, err := sh.Replicas[0].Do(time.Second, "ROLE")
		if err != nil {
			t.Fatal(err)
		}
		if r := role.([]any); r[0] != "slave" || r[1] != "127.0.0.1" || r[2] != int64(sh.Master.Port) {
			t.Errorf("shard %d: ROLE of its replica is %v, want a replica of port %d", i, r, sh.Master.Port)
		}
	}
	for i := range 200 {
		key := fmt.Sprintf("key:%d", i)
		if i%7 == 0 {
			key = fmt.Sprintf("{user%d}.name", i)
		}
		v, err := c.Nodes[0].Do(time.Second, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			t.Fatal(err)
		}
		if got := KeySlot(key); int64(got) != v.(int64) {
			t.Fatalf("KeySlot(%q) = %d, the server says %d", key, got, v)
		}
	}
	for _, key := range []string{"a{}b", "{}", "x{y", "}{z}"} {
		v, err := c.Nodes[0].Do(time.Second, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			t.Fatal(err)
		}
		if got := KeySlot(key); int64(got) != v.(int64) {
			t.Errorf("KeySlot(%q) = %d, the server says %d", key, got, v)
		}
	}

	// A write on the key's master reaches its replica.
	sh := c.Shards[c.ShardOf(KeySlot("greeting"))]
	if _, err := sh.Master.Do(time.Second, "SET", "greeting", "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nodes[0].Do(time.Second, "SET", "greeting", "x"); err == nil && c.Nodes[0] != sh.Master {
		t.Errorf("SET on a node that does not hold the slot succeeded; want MOVED")
	} else if err != nil && !errors.Is(err, ErrReply) {
		t.Errorf("SET on another node: %v, want an error reply", err)
	}
	got := readOnReplica(t, sh.Replicas[0], "greeting")
	if got != "hello" {
		t.Errorf("GET on the replica after READONLY: %q, want hello", got)
	}

	// CheckLayout takes a layout built from the cluster's own, and tells
	// where another differs.
	nodes := c.Addrs()
	index := map[string]int{}
	for i, a := range nodes {
		index[a] = i
	}
	var shards [][]int
	for _, sh := range c.Shards {
		var ks []int
		for _, n := range sh.Servers() {
			ks = append(ks, index[n.Addr])
		}
		shards = append(shards, ks)
	}
	if err := c.CheckLayout(nodes, shards); err != nil {
		t.Errorf("CheckLayout of the cluster's own layout: %v", err)
	}
	swapped := slices.Clone(shards)
	swapped[1] = []int{shards[1][1], shards[1][0]}
	if err := c.CheckLayout(nodes, swapped); err == nil || !strings.Contains(err.Error(), "shard 1 is") {
		t.Errorf("CheckLayout with shard 1's replica first: %v, want an error naming shard 1", err)
	}
	if err := c.CheckLayout(nodes, shards[:2]); err == nil || !strings.Contains(err.Error(), "2 shards, want 3") {
		t.Errorf("CheckLayout with a shard missing: %v, want an error saying 2 shards, want 3", err)
	}

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Nodes {
		if !pidGone(s.Pid) {
			t.Errorf("pid %d still exists after Stop", s.Pid)
		}
	}
}

// readOnReplica sends READONLY then GET key on one connection to s, until
// the replica has the key.
func readOnReplica(t *testing.T, s *Server, key string) string {
	t.Helper()
	for {
		c, err := dial(s)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		_, _ = c.Write(command("READONLY"))
		if _, err := readReply(r); err != nil {
			c.Close()
			t.Fatal(err)
		}
		_, _ = c.Write(command("GET", key))
		v, err := readReply(r)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if v != nil {
			return v.(string)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestClusterNeedsThreeMasters(t *testing.T) {
	_, err := StartClusterN(ClusterOptions{Masters: 2})
	if err == nil || !strings.Contains(err.Error(), "3 or more") {
		t.Fatalf("StartClusterN with 2 masters: %v, want an error saying 3 or more", err)
	}
}

func TestClusterMissingCli(t *testing.T) {
	Need(t)
	_, err := StartClusterN(ClusterOptions{Cli: "/nonexistent/redis-cli"})
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "redis-cli") {
		t.Fatalf("got %v, want ErrMissing naming redis-cli", err)
	}
}

func TestReadReply(t *testing.T) {
	in := "*3\r\n:1\r\n$5\r\nhello\r\n*2\r\n+OK\r\n$-1\r\n"
	v, err := readReply(bufio.NewReader(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(v); got != "[1 hello [OK <nil>]]" {
		t.Errorf("got %s", got)
	}
	_, err = readReply(bufio.NewReader(strings.NewReader("-MOVED 1 127.0.0.1:1\r\n")))
	if !errors.Is(err, ErrReply) || !strings.Contains(err.Error(), "MOVED") {
		t.Errorf("error reply: %v", err)
	}
}

func FuzzReadReply(f *testing.F) {
	f.Add("*3\r\n:1\r\n$5\r\nhello\r\n*2\r\n+OK\r\n$-1\r\n")
	f.Add("-ERR x\r\n")
	f.Add("$3\r\nab\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = readReply(bufio.NewReader(strings.NewReader(in)))
	})
}

func FuzzKeySlot(f *testing.F) {
	f.Add("{user}.name")
	f.Fuzz(func(t *testing.T, key string) {
		s := KeySlot(key)
		if s < 0 || s >= Slots {
			t.Fatalf("KeySlot(%q) = %d", key, s)
		}
		if i := strings.IndexByte(key, '{'); i >= 0 {
			if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
				if KeySlot(key[i+1:i+1+j]) != s {
					t.Fatalf("KeySlot(%q) differs from its tag's", key)
				}
			}
		}
	})
}

func dial(s *Server) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", s.Addr, 10*time.Second)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	return c, err
}
