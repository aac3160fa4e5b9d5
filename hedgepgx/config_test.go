package hedgepgx

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tailcut/hedge"
)

// fakePool makes a pool for host:port without connecting (pgxpool
// connects on first use).
func fakePool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestConfigErrors(t *testing.T) {
	a := fakePool(t, "host=db-a.example port=5432 user=u")
	b := fakePool(t, "host=db-b.example port=5432 user=u")
	a2 := fakePool(t, "host=DB-A.example. port=5432 user=u")
	for _, tc := range []struct {
		name  string
		pools []*pgxpool.Pool
		cfg   Config
		want  []string
	}{
		{"none", nil, Config{}, []string{"pools is empty"}},
		{"one", []*pgxpool.Pool{a}, Config{}, []string{"pools has a single pool"}},
		{"nil", []*pgxpool.Pool{a, nil}, Config{}, []string{"pools[1] is nil"}},
		{"twice", []*pgxpool.Pool{a, a}, Config{}, []string{"pools[1] is the same *pgxpool.Pool as pools[0]"}},
		{"same server", []*pgxpool.Pool{a, a2}, Config{}, []string{"pools[1] and pools[0] connect to the same server (db-a.example:5432)"}},
		{"primary", []*pgxpool.Pool{a, b}, Config{Primary: 2}, []string{"Config.Primary = 2 is not an index of pools: use 0 to 1"}},
		{"primary and none", []*pgxpool.Pool{a, b}, Config{Primary: 1, NoPrimary: true}, []string{"Config.Primary = 1 with Config.NoPrimary"}},
		{"replicas", []*pgxpool.Pool{a, b}, Config{Hedge: hedge.Config{Replicas: 3}}, []string{"Config.Hedge.Replicas = 3 but pools has 2 pools"}},
		{"lag", []*pgxpool.Pool{a, b}, Config{LagInterval: -1, MaxLag: 10}, []string{"Config.MaxLag = 10 with a negative Config.LagInterval"}},
		{"hedge", []*pgxpool.Pool{a, b}, Config{Hedge: hedge.Config{MaxAttempts: 9, Delay: hedge.Fixed(-time.Second)}},
			[]string{"hedgepgx: Config.Hedge.MaxAttempts = 9", "Fixed delay -1s is negative"}},
		{"all at once", []*pgxpool.Pool{a, a2, nil}, Config{Primary: -1, MaxLag: 1, LagInterval: -time.Second},
			[]string{"pools[2] is nil", "same server", "Config.Primary = -1", "Config.MaxLag = 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.pools, tc.cfg)
			if err == nil {
				c.Close()
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("%v does not match ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
			if strings.Contains(tc.name, "hedge") && !errors.Is(err, hedge.ErrInvalidConfig) {
				t.Errorf("%v does not match hedge.ErrInvalidConfig", err)
			}
		})
	}
}

// TestNewFromConfigsClosesOnError: a mistaken Config leaves no pool open
// (goleak in TestMain would see their goroutines).
func TestNewFromConfigsClosesOnError(t *testing.T) {
	pc, err := pgxpool.ParseConfig("host=db-a.example user=u")
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewFromConfigs([]*pgxpool.Config{pc, pc}, Config{})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "configs[1] and configs[0] connect to the same server") {
		t.Errorf("NewFromConfigs over one server twice: %v", err)
	}
	if pc.ConnConfig.BuildContextWatcherHandler == nil {
		t.Fatal("no handler")
	}
}
