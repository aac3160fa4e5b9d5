package hedgeredis

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge"
)

// clientsAt returns one client per address (no server needed: nothing is
// dialled), closed when the test ends.
func clientsAt(t *testing.T, addrs ...string) []*redis.Client {
	t.Helper()
	out := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		o := &redis.Options{Addr: a}
		if strings.HasPrefix(a, "/") {
			o.Network = "unix"
		}
		out[i] = redis.NewClient(o)
	}
	t.Cleanup(func() { closeAll(out) })
	return out
}

// wantMistakes checks that err is a configuration error listing every one
// of want, each on a line of its own, and nothing else.
func wantMistakes(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %q", want)
	}
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("errors.Is(%v, ErrInvalidConfig) = false", err)
	}
	lines := strings.Split(err.Error(), "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.Contains(l, w)
		}
		if !found {
			t.Errorf("no line of the error contains %q; the error:\n%v", w, err)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("%d mistakes reported, want %d; the error:\n%v", len(lines), len(want), err)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "hedgeredis: ") {
			t.Errorf("line %q does not start with hedgeredis:", l)
		}
	}
}

func TestNewRejectsMistakes(t *testing.T) {
	two := clientsAt(t, "127.0.0.1:1", "127.0.0.1:2")
	for _, tc := range []struct {
		name    string
		clients []*redis.Client
		cfg     Config
		want    string
	}{
		{"no clients", nil, Config{}, "clients is empty"},
		{"nil client", []*redis.Client{two[0], nil}, Config{}, "clients[1] is nil"},
		{"primary out of range", two, Config{Primary: 2}, "Config.Primary = 2 is not an index of clients: use 0 to 1"},
		{"negative primary", two, Config{Primary: -1}, "Config.Primary = -1"},
		{"replicas mismatch", two, Config{Hedge: hedge.Config{Replicas: 3}}, "Config.Hedge.Replicas = 3 but clients has 2 entries"},
		{"bad hedge config", two, Config{Hedge: hedge.Config{MaxAttempts: 9}}, "hedgeredis: Config.Hedge.MaxAttempts = 9: use 1 to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.clients, tc.cfg)
			wantMistakes(t, err, tc.want)
		})
	}
}

// TestNewReportsEveryMistake: New reports every mistake at once, its own
// and those hedge.New finds in Config.Hedge, each with the path of the
// field as the caller wrote it (Config.Hedge.MaxAttempts, not
// Config.MaxAttempts), and hedge.New's errors stay reachable with
// errors.As.
func TestNewReportsEveryMistake(t *testing.T) {
	cs := clientsAt(t, "127.0.0.1:1", "127.0.0.1:2")
	_, err := New([]*redis.Client{cs[0], nil, cs[1]}, Config{
		Primary: 5,
		Hedge: hedge.Config{
			Replicas:    7,
			MaxAttempts: 9,
			Rollout:     2,
			Budget:      &hedge.Budget{},
			NoBudget:    true,
			Delay:       hedge.Percentile{P: 120, Floor: -time.Second},
		},
	})
	wantMistakes(t, err,
		"clients[1] is nil",
		"Config.Primary = 5 is not an index of clients",
		"Config.Hedge.Replicas = 7 but clients has 3 entries",
		"hedgeredis: Config.Hedge.MaxAttempts = 9",
		"hedgeredis: Config.Hedge.Rollout = 2",
		"hedgeredis: Config.Hedge.Budget is a zero Budget",
		"hedgeredis: Config.Hedge sets both Budget and NoBudget",
		"hedgeredis: Config.Hedge.Delay: Percentile.P = 120",
		"hedgeredis: Config.Hedge.Delay: Percentile.Floor = -1s",
	)
	var fe *hedgeFieldError
	if !errors.As(err, &fe) || !strings.HasPrefix(fe.Unwrap().Error(), "hedge: ") {
		t.Errorf("hedge.New's own error is not wrapped: %v", err)
	}
}

// TestNewFromOptionsReportsEveryMistake: a nil options entry does not
// hide the other mistakes.
func TestNewFromOptionsReportsEveryMistake(t *testing.T) {
	_, err := NewFromOptions([]*redis.Options{nil, {Addr: "127.0.0.1:1"}, nil, {Addr: "127.0.0.1:1"}}, Config{
		Primary: 4,
		Hedge:   hedge.Config{MaxAttempts: -1, Delay: hedge.Fixed(-time.Second)},
	})
	wantMistakes(t, err,
		"opts[0] is nil",
		"opts[2] is nil",
		"opts[3] (127.0.0.1:1) and opts[1] (127.0.0.1:1) are the same server",
		"Config.Primary = 4 is not an index of opts: use 0 to 3",
		"hedgeredis: Config.Hedge.MaxAttempts = -1",
		"hedgeredis: Config.Hedge.Delay: Fixed delay -1s is negative",
	)
}

// TestNewRejectsClientsThatCannotHedge: a Client over one server, or over
// the same server twice, could never send a useful hedge, and is refused
// with what to do. Addresses that are different names of what may be one
// host are accepted: only DNS and the server's bindings could tell.
func TestNewRejectsClientsThatCannotHedge(t *testing.T) {
	one := clientsAt(t, "127.0.0.1:1")
	if _, err := New(one, Config{}); err == nil {
		t.Error("New over one client: no error")
	} else {
		wantMistakes(t, err, "clients has a single entry: a hedge needs another replica")
	}
	// Even with hedging off: the Client would never hedge.
	if _, err := New(one, Config{Hedge: hedge.Config{MaxAttempts: 1}}); err == nil {
		t.Error("New over one client, MaxAttempts 1: no error")
	}
	if _, err := NewFromOptions([]*redis.Options{{Addr: "127.0.0.1:1"}}, Config{}); err == nil {
		t.Error("NewFromOptions with one options value: no error")
	} else {
		wantMistakes(t, err, "opts has a single entry")
	}

	if _, err := New([]*redis.Client{one[0], one[0]}, Config{}); err == nil {
		t.Error("New with the same client twice: no error")
	} else {
		wantMistakes(t, err, "clients[1] is the same *redis.Client as clients[0]: give one client per replica")
	}

	for _, pair := range [][2]string{
		{"127.0.0.1:6379", "127.0.0.1:6379"},
		{"", "localhost:6379"}, // go-redis's default address
		{"Redis-A.example:6379", "redis-a.example.:6379"},
		{"redis-a.example:6379", "redis-a.example:06379"},
		{"[::1]:6379", "[0:0:0:0:0:0:0:1]:6379"},
		{"[::ffff:10.0.0.1]:6379", "10.0.0.1:6379"},
		{"/run/redis.sock", "/run/../run/redis.sock"},
	} {
		cs := clientsAt(t, pair[0], pair[1])
		_, err := New(cs, Config{})
		if err == nil {
			t.Errorf("New over %q and %q: no error", pair[0], pair[1])
			continue
		}
		wantMistakes(t, err, "clients[1] ("+cs[1].Options().Addr+") and clients[0] ("+cs[0].Options().Addr+") are the same server")
		if !strings.Contains(err.Error(), "give each replica's address once") {
			t.Errorf("the error does not say what to do: %v", err)
		}
	}

	for _, pair := range [][2]string{
		{"127.0.0.1:6379", "127.0.0.1:6380"},
		{"localhost:6379", "127.0.0.1:6379"},
		{"redis-a.example:6379", "redis-b.example:6379"},
		{"/run/a.sock", "/run/b.sock"},
	} {
		c, err := New(clientsAt(t, pair[0], pair[1]), Config{})
		if err != nil {
			t.Errorf("New over %q and %q: %v", pair[0], pair[1], err)
			continue
		}
		_ = c.Close()
	}
}

// The canonical forms behind the check of TestNewRejectsClientsThatCannotHedge.
func TestServerKey(t *testing.T) {
	for _, tc := range []struct{ network, addr, want string }{
		{"tcp", "127.0.0.1:6379", "tcp:127.0.0.1:6379"},
		{"tcp4", "127.0.0.1:6379", "tcp:127.0.0.1:6379"},
		{"tcp", "redis-a", "tcp:redis-a:6379"}, // no port: the default one
		{"tcp", "[::1]", "tcp:[::1]:6379"},
		{"tcp", "::1", "tcp:[::1]:6379"},
		{"tcp", "HOST.Example.:6379", "tcp:host.example:6379"},
		{"tcp", "[fe80::1%eth0]:6379", "tcp:[fe80::1%eth0]:6379"},
		{"unix", "/tmp//redis.sock", "unix:/tmp/redis.sock"},
	} {
		if got := serverKey(tc.network, tc.addr); got != tc.want {
			t.Errorf("serverKey(%q, %q) = %q, want %q", tc.network, tc.addr, got, tc.want)
		}
	}
}

func TestQualify(t *testing.T) {
	for in, want := range map[string]string{
		"Config.MaxAttempts = 9: use 1 to 8":                  "Config.Hedge.MaxAttempts = 9: use 1 to 8",
		"Config sets both Budget and NoBudget: keep one":      "Config.Hedge sets both Budget and NoBudget: keep one",
		"Window = 5 (Config.MaxOps + 1): lower Config.MaxOps": "Window = 5 (Config.Hedge.MaxOps + 1): lower Config.Hedge.MaxOps",
		"make it with hedge.Config{Replicas: 2}":              "make it with hedge.Config{Replicas: 2}",
		"see hedge.Config.Delay and MyConfig.X":               "see hedge.Config.Delay and MyConfig.X",
		"Config":                                              "Config.Hedge",
	} {
		if got := qualify(in); got != want {
			t.Errorf("qualify(%q) = %q, want %q", in, got, want)
		}
	}
}
