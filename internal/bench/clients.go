package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tailcut/hedge"
)

// Limits of Scenario.Clients and Scenario.FanOut.
const (
	MaxClients = 200
	MaxFanOut  = 256
)

// ManyClients returns c with each run's traffic split among n clients,
// each made by c.New and so with a Hedger, connections and state of its
// own, as n independent services sharing the replicas would be. Request i
// goes to the client a hash of i picks: a split of the arrivals that every
// configuration of a repeat shares, each client's share a Poisson stream of
// its own (a Poisson stream split at random is one). n < 2 returns c.
func ManyClients(c Contender, n int) Contender {
	if n < 2 {
		return c
	}
	inner := c.New
	c.New = func(b Backend) (Client, error) {
		m := &multiClient{cs: make([]Client, 0, n)}
		for range n {
			cl, err := inner(b)
			if err != nil {
				_ = m.Close()
				return nil, fmt.Errorf("client %d of %d: %w", len(m.cs)+1, n, err)
			}
			m.cs = append(m.cs, cl)
		}
		return m, nil
	}
	return c
}

// multiClient is n clients that share the traffic.
type multiClient struct {
	cs []Client
}

// clientOf hashes request i to one of n clients.
func clientOf(i, n int) int { return int(splitmix(uint64(i)) % uint64(n)) }

func (m *multiClient) Do(ctx context.Context, i int) error {
	return m.cs[clientOf(i, len(m.cs))].Do(ctx, i)
}

// Stats sums the clients' counters. Of the instantaneous and quantile
// ones (Delay, timer lag), which cannot be summed, it reports the
// clients' median delay and their largest timer lags.
func (m *multiClient) Stats() ClientStats {
	all := make([]ClientStats, len(m.cs))
	for i, c := range m.cs {
		all[i] = c.Stats()
	}
	return sumStats(all)
}

func sumStats(all []ClientStats) ClientStats {
	s := all[0]
	add := func(a *int64, b int64) {
		if *a == Unknown || b == Unknown {
			*a = Unknown
			return
		}
		*a += b
	}
	addD := func(a *time.Duration, b time.Duration) {
		x := int64(*a)
		add(&x, int64(b))
		*a = time.Duration(x)
	}
	maxD := func(a *time.Duration, b time.Duration) {
		if *a == Unknown || b == Unknown {
			*a = Unknown
			return
		}
		*a = max(*a, b)
	}
	for _, o := range all[1:] {
		add(&s.Requests, o.Requests)
		add(&s.Hedges, o.Hedges)
		add(&s.HedgeWins, o.HedgeWins)
		add(&s.RefusedBudget, o.RefusedBudget)
		addD(&s.Wasted, o.Wasted)
		add(&s.PoolWaits, o.PoolWaits)
		addD(&s.PoolWaitTime, o.PoolWaitTime)
		add(&s.PoolTimeouts, o.PoolTimeouts)
		add(&s.Dials, o.Dials)
		maxD(&s.TimerLagP50, o.TimerLagP50)
		maxD(&s.TimerLagP99, o.TimerLagP99)
	}
	delays := make([]time.Duration, 0, len(all))
	for _, o := range all {
		if o.Delay != Unknown {
			delays = append(delays, o.Delay)
		}
	}
	s.Delay = Unknown
	if len(delays) > 0 {
		slices.Sort(delays)
		s.Delay = delays[len(delays)/2]
	}
	return s
}

func (m *multiClient) Close() error {
	var errs []error
	for _, c := range m.cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// FanOut returns c with each request reading w leaves at once and waiting
// for all of them: request i sends leaves i*w to i*w+w-1, each through
// the client's Do with hedge.WithFanOut, so that a Hedger knows the leaves
// for one fan-out's and not load. A request fails with its leaves'
// errors. The client's counters count leaves. w < 2 returns c. A
// Contender with NewFan sends each request as one fan-out call instead,
// of w leaves (one when w < 2).
func FanOut(c Contender, w int) Contender {
	if c.NewFan != nil {
		fan := c.NewFan
		c.New = func(b Backend) (Client, error) { return fan(b, max(w, 1)) }
		return c
	}
	if w < 2 {
		return c
	}
	inner := c.New
	c.New = func(b Backend) (Client, error) {
		cl, err := inner(b)
		if err != nil {
			return nil, err
		}
		return &fanOutClient{Client: cl, w: w}, nil
	}
	return c
}

// fanOutClient sends w leaves per request.
type fanOutClient struct {
	Client
	w int
}

func (f *fanOutClient) Do(ctx context.Context, i int) error {
	ctx = hedge.WithFanOut(ctx)
	errs := make([]error, f.w)
	var wg sync.WaitGroup
	for j := 1; j < f.w; j++ {
		wg.Go(func() { errs[j] = f.Client.Do(ctx, i*f.w+j) })
	}
	errs[0] = f.Client.Do(ctx, i*f.w)
	wg.Wait()
	return errors.Join(errs...)
}
