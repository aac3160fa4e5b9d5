package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailcut/hedge/internal/testproc"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Cluster is a running Redis Cluster on loopback, made by StartCluster or
// StartClusterN. Every node is a Server: Stall, Stop and Log work on it as
// on any other.
//
// Its layout is the one the nodes agreed on when the cluster was ready.
// Nothing follows it afterwards. A master stalled for longer than
// ClusterOptions.NodeTimeout may be replaced by its replica.
type Cluster struct {
	// Nodes lists every node: Shards' masters first, in shard order,
	// then their replicas.
	Nodes []*Server
	// Shards lists the masters with their replicas and slots, ordered by
	// their first slot.
	Shards []ClusterShard
}

// ClusterShard is one master of a Cluster, its replicas and its slots.
type ClusterShard struct {
	// Master serves the shard's slots, reads and writes.
	Master *Server
	// Replicas replicate Master. They serve reads on connections that
	// sent READONLY.
	Replicas []*Server
	// Ranges are the shard's slots: each [first, last], both included.
	Ranges [][2]int
}

// Servers returns the shard's master, then its replicas.
func (s ClusterShard) Servers() []*Server {
	return append([]*Server{s.Master}, s.Replicas...)
}

// HasSlot reports whether the shard serves slot.
func (s ClusterShard) HasSlot(slot int) bool {
	for _, r := range s.Ranges {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

// ClusterOptions configures StartClusterN. The zero value starts 3
// masters with 1 replica each.
type ClusterOptions struct {
	// Options configures each node as for StartN. Its StartTimeout also
	// bounds how long the cluster may take to be ready.
	Options
	// Masters is the number of masters, 3 or more (redis-cli refuses
	// fewer). Zero means 3.
	Masters int
	// ReplicasPerMaster is the number of replicas of each master. Zero
	// means 1; a negative value means none.
	ReplicasPerMaster int
	// NodeTimeout is the cluster's cluster-node-timeout: how long a node
	// may not answer before the others count it as failed, and a master's
	// replica may take its place. Zero means 60 seconds, so that a test's
	// Stall does not start a failover.
	NodeTimeout time.Duration
	// Cli is the redis-cli executable. Empty means redis-cli beside
	// Options.Binary.
	Cli string
}

func (o ClusterOptions) withDefaults() ClusterOptions {
	o.Options = o.Options.withDefaults()
	if o.Masters == 0 {
		o.Masters = 3
	}
	switch {
	case o.ReplicasPerMaster == 0:
		o.ReplicasPerMaster = 1
	case o.ReplicasPerMaster < 0:
		o.ReplicasPerMaster = 0
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = time.Minute
	}
	if o.Cli == "" {
		o.Cli = filepath.Join(filepath.Dir(o.Binary), "redis-cli")
	}
	if o.StartTimeout < 30*time.Second {
		// A cluster's nodes meet and replicas sync after the nodes start.
		o.StartTimeout = 30 * time.Second
	}
	return o
}

// StartCluster starts a cluster of masters, each with replicasPerMaster
// replicas, and registers its Stop with tb.Cleanup. Without redis-server
// it skips or fails the test as Need does (and returns nil if tb lets it
// return); if the cluster does not start, it fails the test (Fatalf).
func StartCluster(tb TB, masters, replicasPerMaster int) *Cluster {
	tb.Helper()
	if !Need(tb) {
		return nil
	}
	if replicasPerMaster == 0 {
		replicasPerMaster = -1
	}
	c, err := StartClusterN(ClusterOptions{Masters: masters, ReplicasPerMaster: replicasPerMaster})
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Fatalf("%v", err)
		}
	})
	return c
}

// StartClusterN starts the nodes of a cluster (each with
// --cluster-enabled yes, its own cluster bus port and config file),
// creates the cluster with
//
//	redis-cli --cluster create ADDR... --cluster-replicas R --cluster-yes
//
// and returns once every node says cluster_state:ok, every node reports
// the same slots with the same master and replicas, and every replica's
// link to its master is up with no sync in progress. On error the nodes
// are stopped. The caller must call Stop.
func StartClusterN(opt ClusterOptions) (*Cluster, error) {
	opt = opt.withDefaults()
	if opt.Masters < 3 {
		return nil, fmt.Errorf("redistest: StartClusterN with %d masters: redis-cli --cluster create needs 3 or more", opt.Masters)
	}
	if err := checkBinary(opt.Binary); err != nil {
		return nil, err
	}
	if err := checkCli(opt.Cli); err != nil {
		return nil, err
	}
	n := opt.Masters * (1 + opt.ReplicasPerMaster)
	nodes := make([]*Server, 0, n)
	for range n {
		s, err := startClusterNode(opt)
		if err != nil {
			_ = StopAll(nodes)
			return nil, err
		}
		nodes = append(nodes, s)
	}
	c, err := createCluster(nodes, opt)
	if err != nil {
		_ = StopAll(nodes)
		return nil, err
	}
	return c, nil
}

// checkCli returns an error matching ErrMissing unless cli is an
// executable file.
func checkCli(cli string) error {
	if err := checkBinary(cli); err != nil {
		return fmt.Errorf("redistest: redis-cli is needed to create a cluster: %w", err)
	}
	return nil
}

// startClusterNode starts one cluster node on a free port, with a cluster
// bus port of its own (not port+10000, which may be taken).
func startClusterNode(opt ClusterOptions) (*Server, error) {
	return testproc.OnFreePort(5, func(port int) (*Server, error) {
		bus, err := testproc.FreePort()
		if err != nil {
			return nil, err
		}
		if bus == port {
			return nil, fmt.Errorf("redistest: the bus port %d is the node's port", bus)
		}
		return launch(opt.Options, port, func(dir string) []string {
			return []string{
				"--cluster-enabled", "yes",
				"--cluster-port", strconv.Itoa(bus),
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", strconv.FormatInt(opt.NodeTimeout.Milliseconds(), 10),
				// A replica's first sync starts at once, not after 5 s.
				"--repl-diskless-sync-delay", "0",
				// CLUSTER SLOTS leaves out a replica whose offset is 0;
				// the master's pings to its replicas move it.
				"--repl-ping-replica-period", "1",
			}
		})
	})
}

// createCluster runs redis-cli --cluster create over nodes and waits until
// the cluster is ready.
func createCluster(nodes []*Server, opt ClusterOptions) (*Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opt.StartTimeout)
	defer cancel()
	args := []string{"--cluster", "create"}
	for _, s := range nodes {
		args = append(args, s.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(opt.ReplicasPerMaster), "--cluster-yes")
	out, err := exec.CommandContext(ctx, opt.Cli, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("redistest: %s %s: %w; its output:\n%s", opt.Cli, strings.Join(args, " "), err, out)
	}
	byAddr := map[string]*Server{}
	for _, s := range nodes {
		byAddr[s.Addr] = s
	}
	var last error
	for {
		c, err := readyLayout(nodes, byAddr, opt)
		if err == nil {
			return c, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("redistest: the cluster was not ready within %v: %v", opt.StartTimeout, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// readyLayout returns the cluster's layout if it is ready (see
// StartClusterN), or an error saying what is not.
func readyLayout(nodes []*Server, byAddr map[string]*Server, opt ClusterOptions) (*Cluster, error) {
	var ref *Cluster
	for _, s := range nodes {
		info, err := s.Do(time.Second, "CLUSTER", "INFO")
		if err != nil {
			return nil, err
		}
		if text, _ := info.(string); !strings.Contains(text, "cluster_state:ok") {
			return nil, fmt.Errorf("%s: cluster_state is not ok", s.Addr)
		}
		slots, err := s.Do(time.Second, "CLUSTER", "SLOTS")
		if err != nil {
			return nil, err
		}
		c, err := parseSlots(slots, byAddr)
		if err != nil {
			return nil, fmt.Errorf("%s: CLUSTER SLOTS: %w", s.Addr, err)
		}
		if err := c.complete(opt); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Addr, err)
		}
		if ref == nil {
			ref = c
		} else if !ref.sameLayout(c) {
			return nil, fmt.Errorf("%s sees a layout other than %s's", s.Addr, nodes[0].Addr)
		}
	}
	for _, sh := range ref.Shards {
		for _, r := range sh.Replicas {
			v, err := r.Do(time.Second, "INFO", "replication")
			if err != nil {
				return nil, err
			}
			text, _ := v.(string)
			if !strings.Contains(text, "master_link_status:up") || !strings.Contains(text, "master_sync_in_progress:0") {
				return nil, fmt.Errorf("replica %s is not in sync with %s", r.Addr, sh.Master.Addr)
			}
		}
	}
	for _, sh := range ref.Shards {
		ref.Nodes = append(ref.Nodes, sh.Master)
	}
	for _, sh := range ref.Shards {
		ref.Nodes = append(ref.Nodes, sh.Replicas...)
	}
	return ref, nil
}

// parseSlots reads a CLUSTER SLOTS reply: ranges of [first, last, master,
// replica...], each node [ip, port, id, ...].
func parseSlots(v any, byAddr map[string]*Server) (*Cluster, error) {
	ranges, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("reply %v is not an array", v)
	}
	c := &Cluster{}
	index := map[*Server]int{} // master -> shard
	for _, rv := range ranges {
		r, ok := rv.([]any)
		if !ok || len(r) < 3 {
			return nil, fmt.Errorf("range %v is not [first, last, master, ...]", rv)
		}
		first, ok1 := r[0].(int64)
		last, ok2 := r[1].(int64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("range %v has no slot numbers", rv)
		}
		var servers []*Server
		for _, nv := range r[2:] {
			n, ok := nv.([]any)
			if !ok || len(n) < 2 {
				return nil, fmt.Errorf("node %v is not [ip, port, ...]", nv)
			}
			ip, _ := n[0].(string)
			port, _ := n[1].(int64)
			s := byAddr[net.JoinHostPort(ip, strconv.FormatInt(port, 10))]
			if s == nil {
				return nil, fmt.Errorf("node %s:%d is not one this harness started", ip, port)
			}
			servers = append(servers, s)
		}
		i, ok := index[servers[0]]
		if !ok {
			i = len(c.Shards)
			index[servers[0]] = i
			c.Shards = append(c.Shards, ClusterShard{Master: servers[0], Replicas: servers[1:]})
		}
		sh := &c.Shards[i]
		if !slices.Equal(sh.Replicas, servers[1:]) {
			return nil, fmt.Errorf("master %s has replicas that differ from range to range", servers[0].Addr)
		}
		sh.Ranges = append(sh.Ranges, [2]int{int(first), int(last)})
	}
	for i := range c.Shards {
		slices.SortFunc(c.Shards[i].Ranges, func(a, b [2]int) int { return a[0] - b[0] })
		slices.SortFunc(c.Shards[i].Replicas, func(a, b *Server) int { return a.Port - b.Port })
	}
	slices.SortFunc(c.Shards, func(a, b ClusterShard) int { return a.Ranges[0][0] - b.Ranges[0][0] })
	return c, nil
}

// complete reports whether every slot is served, by opt.Masters masters
// with opt.ReplicasPerMaster replicas each.
func (c *Cluster) complete(opt ClusterOptions) error {
	if len(c.Shards) != opt.Masters {
		return fmt.Errorf("%d masters serve slots, want %d", len(c.Shards), opt.Masters)
	}
	covered := 0
	for _, sh := range c.Shards {
		if len(sh.Replicas) != opt.ReplicasPerMaster {
			return fmt.Errorf("master %s has %d replicas, want %d", sh.Master.Addr, len(sh.Replicas), opt.ReplicasPerMaster)
		}
		for _, r := range sh.Ranges {
			covered += r[1] - r[0] + 1
		}
	}
	if covered != Slots {
		return fmt.Errorf("%d of %d slots are served", covered, Slots)
	}
	return nil
}

// sameLayout reports whether c and d have the same shards.
func (c *Cluster) sameLayout(d *Cluster) bool {
	return slices.EqualFunc(c.Shards, d.Shards, func(a, b ClusterShard) bool {
		return a.Master == b.Master && slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.Ranges, b.Ranges)
	})
}

// Stop stops every node (StopAll).
func (c *Cluster) Stop() error { return StopAll(c.Nodes) }

// Addrs returns every node's address, in Nodes' order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr
	}
	return addrs
}

// ShardOf returns the index in Shards of the shard that serves slot, or
// -1 if none does.
func (c *Cluster) ShardOf(slot int) int {
	for i, sh := range c.Shards {
		if sh.HasSlot(slot) {
			return i
		}
	}
	return -1
}

// CheckLayout reports whether a client's layout is the cluster's: nodes
// holds each node's address, by the client's node index, and shards holds
// each shard's node indexes. Shard s must be Shards[s], its master first,
// then its replicas. The error says which shard differs.
func (c *Cluster) CheckLayout(nodes []string, shards [][]int) error {
	if len(shards) != len(c.Shards) {
		return fmt.Errorf("redistest: %d shards, want %d", len(shards), len(c.Shards))
	}
	for s, sh := range c.Shards {
		var want, got []string
		for _, n := range sh.Servers() {
			want = append(want, n.Addr)
		}
		for _, k := range shards[s] {
			if k < 0 || k >= len(nodes) {
				return fmt.Errorf("redistest: shard %d holds node %d, but there are %d nodes", s, k, len(nodes))
			}
			got = append(got, nodes[k])
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("redistest: shard %d is %v, want %v (master first)", s, got, want)
		}
	}
	return nil
}

// KeySlot returns the hash slot of key, as Redis Cluster computes it:
// CRC16 (XMODEM) of the key, or of its hash tag (the part between the
// first "{" and the next "}", when not empty), modulo Slots.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), bit by bit.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// Do sends one command to the server on a fresh connection and returns
// its reply, read as RESP2: a string for a simple or bulk string, an
// int64, nil, a []any for an array, and an error reply as an error. The
// timeout bounds the whole exchange.
func (s *Server) Do(timeout time.Duration, args ...string) (any, error) {
	c, err := net.DialTimeout("tcp", s.Addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("redistest: %s: %w", s.Addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(command(args...)); err != nil {
		return nil, fmt.Errorf("redistest: %s: %w", s.Addr, err)
	}
	v, err := readReply(bufio.NewReader(c))
	if err != nil {
		return nil, fmt.Errorf("redistest: %s: %s: %w", s.Addr, strings.Join(args, " "), err)
	}
	return v, nil
}

// ErrReply is matched (errors.Is) by the error of Do when the server
// answered with an error reply.
var ErrReply = errors.New("error reply")

// readReply reads one RESP2 value.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return nil, fmt.Errorf("%w: %s", ErrReply, body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return nil, fmt.Errorf("malformed bulk length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return nil, fmt.Errorf("malformed array length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown reply type %q", kind)
}
