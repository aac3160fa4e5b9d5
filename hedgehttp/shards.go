package hedgehttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/tailcut/hedge"
)

// ErrNotReplayable is the error, wrapped, of Fan for a leaf request that
// could not be copied: a body without GetBody, or a method other than
// GET, HEAD, OPTIONS and TRACE without an Idempotency-Key header and
// ShardConfig.HedgeKeyedWrites. Nothing is sent then. Match it with
// errors.Is.
var ErrNotReplayable = errors.New("hedgehttp: request cannot be copied")

// ShardConfig configures a Shards. The zero ShardConfig hedges with the
// zero hedge.Config (the default policy), and the operation class is the
// method alone.
type ShardConfig struct {
	// Hedge configures the Shards' Hedger. Replicas, Shards and
	// ReplicaNames are set from NewShards' addresses: leave them zero.
	Hedge hedge.Config

	// Route gives a request's route template, as Config.Route does.
	Route func(*http.Request) string

	// HedgeKeyedWrites lets requests of other methods than GET, HEAD,
	// OPTIONS and TRACE be hedged when they carry an Idempotency-Key (or
	// X-Idempotency-Key) header, as Config.HedgeKeyedWrites does.
	HedgeKeyedWrites bool
}

// Shards sends requests to a sharded service: each shard has its own
// replicas, and a server may hold several shards. A request goes to the
// servers of one shard, and its hedges to another server of that shard,
// never elsewhere. DoShard sends one request; Fan sends one request per
// leaf to the leaves' shards, as hedge.DoFan runs them (one budget, the
// sibling trigger, FanOut.Need). It is safe for concurrent use. Make one
// with NewShards.
//
// Its Hedger has one replica per distinct server (hedge.Config.Shards):
// load, the spare-capacity and payoff rules, probation and load reports
// are per server, whichever shards it holds.
type Shards struct {
	t       *Transport
	servers []string // base URLs in normal form, by server index
	shards  [][]int
}

// NewShards returns a Shards over shards: shards[s] lists the base URLs
// of shard s's replicas ("http://10.0.0.1:8080"), one or more, each as in
// Config.Replicas. A server that holds several shards is listed in each:
// base URLs with the same host and port are one server. Requests go
// through base (nil means http.DefaultTransport).
//
// cfg.Hedge gets Replicas (the number of distinct servers), Shards (each
// shard's servers) and ReplicaNames (each server's base URL), so that
// stats and metrics name servers by address. The error lists every
// mistake at once, each with what to do.
func NewShards(base http.RoundTripper, shards [][]string, cfg ShardConfig) (*Shards, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	var errs []error
	if len(shards) == 0 {
		errs = append(errs, errors.New("hedgehttp: NewShards without shards: give the base URLs of each shard's replicas, shards[s] for shard s"))
	}
	if cfg.Hedge.Replicas != 0 || cfg.Hedge.Shards != nil || cfg.Hedge.ReplicaNames != nil {
		errs = append(errs, errors.New("hedgehttp: ShardConfig.Hedge sets Replicas, Shards or ReplicaNames: leave them zero; NewShards sets them from the shards' base URLs"))
	}
	s := &Shards{shards: make([][]int, len(shards))}
	var reps []replica
	index := map[string]int{} // backend (host and port): server index
	for i, urls := range shards {
		if len(urls) == 0 {
			errs = append(errs, fmt.Errorf("hedgehttp: NewShards: shards[%d] is empty: list the base URLs of the shard's replicas, at least one", i))
			continue
		}
		for j, u := range urls {
			o, err := parseReplica(u)
			if err != nil {
				errs = append(errs, fmt.Errorf("hedgehttp: NewShards: shards[%d][%d]: %w", i, j, err))
				continue
			}
			k, ok := index[o.backend()]
			switch {
			case !ok:
				k = len(s.servers)
				index[o.backend()] = k
				s.servers = append(s.servers, o.String())
				reps = append(reps, replica{scheme: o.scheme, host: o.hostport()})
			case reps[k].scheme != o.scheme:
				errs = append(errs, fmt.Errorf("hedgehttp: NewShards: shards[%d][%d] = %q is server %s with another scheme: write each server's base URL the same way in every shard", i, j, u, s.servers[k]))
				continue
			case slices.Contains(s.shards[i], k):
				errs = append(errs, fmt.Errorf("hedgehttp: NewShards: shards[%d][%d] = %q repeats a server of the same shard (%s): a hedge could land on the server that holds the primary; list each replica of a shard once", i, j, u, s.servers[k]))
				continue
			}
			s.shards[i] = append(s.shards[i], k)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	hc := cfg.Hedge
	hc.Replicas, hc.Shards, hc.ReplicaNames = len(s.servers), s.shards, slices.Clone(s.servers)
	h, err := hedge.New(hc)
	if err != nil {
		return nil, fmt.Errorf("hedgehttp: ShardConfig.Hedge: %w", err)
	}
	s.t = &Transport{
		base:        base,
		hedgeRT:     base, // a hedge goes to another server anyway
		h:           h,
		replicas:    reps,
		maxBody:     -1,
		keyedWrites: cfg.HedgeKeyedWrites,
		route:       cfg.Route,
	}
	return s, nil
}

// Hedger returns the Shards' Hedger: its Stats hold the per-operation and
// per-shard counters, its ReplicaStats the per-server ones.
func (s *Shards) Hedger() *hedge.Hedger { return s.t.h }

// Len returns the number of shards.
func (s *Shards) Len() int { return len(s.shards) }

// Servers returns the base URL of each distinct server, in normal form,
// by server index (hedge.Attempt.Replica, the Hedger's replica).
func (s *Shards) Servers() []string { return slices.Clone(s.servers) }

// Shard returns the indices in Servers of shard's servers.
func (s *Shards) Shard(shard int) []int { return slices.Clone(s.shards[shard]) }

// Stats returns a snapshot of the counters the Shards keeps beside its
// Hedger's (load reports, pushbacks, retryable statuses, requests sent
// once).
func (s *Shards) Stats() Stats { return s.t.Stats() }

// CloseIdleConnections closes the idle connections of the base transport,
// if it has such a method.
func (s *Shards) CloseIdleConnections() { s.t.CloseIdleConnections() }

// DoShard sends req to the servers of shard, hedged among them, and
// returns what read made of the winning copy's response.
//
// req's scheme and host are replaced by each copy's server's; build it
// with the path and query alone (http.NewRequest("GET",
// "/search?q=go", nil)) or any host. Its context is replaced by ctx. It
// is never modified. A request that cannot be copied (see
// ErrNotReplayable) is sent once.
//
// read runs inside the copy, while its context lives; the response's body
// is closed after it returns. Responses are judged as RoundTrip judges
// them: a 502, 503 or 504 fails the copy and sends the next at once, a 429
// or Retry-After stops further copies, anything else is the answer and is
// handed to read. An error from read fails the copy, and the next copy
// goes at once (a body cut by a stall, say): return a hedge.Permanent
// error for an answer that no other server would better.
func DoShard[T any](ctx context.Context, s *Shards, shard int, req *http.Request, read func(*http.Response) (T, error)) (T, error) {
	var zero T
	if req == nil || req.URL == nil || read == nil {
		return zero, errors.New("hedgehttp: DoShard needs a request with a URL and a read function")
	}
	if shard < 0 || shard >= len(s.shards) {
		return zero, fmt.Errorf("hedgehttp: DoShard: shard %d is not one of the %d shards: use 0 to %d", shard, len(s.shards), len(s.shards)-1)
	}
	l, err := s.leaf(req)
	if err != nil {
		ctx = sendOnce(ctx)
		l = shardLeaf{req: req, getBody: req.GetBody}
	}
	return hedge.DoShard(ctx, s.t.h, s.t.op(req), shard, func(ctx context.Context, a hedge.Attempt) (T, error) {
		return sendLeaf(ctx, s.t, l, a, read)
	})
}

// Fan sends reqs[i] as leaf i of a fan-out over the shards, with
// hedge.DoFan: leaf i's copies go to the servers of its shard
// (fo.Shard(i), or i mod Len() when fo.Shard is nil), and nowhere else.
// The leaves share one budget, the sibling trigger, Need and GoodEnough,
// as in hedge.DoFan. The operation class is reqs[0]'s. Requests are taken
// as in DoShard, and read(i, resp) reads leaf i's winning response inside
// its copy.
//
// Every request must be one that can be copied: Fan sends nothing and
// returns an error matching ErrNotReplayable otherwise.
func Fan[T any](ctx context.Context, s *Shards, reqs []*http.Request, fo hedge.FanOut, read func(i int, resp *http.Response) (T, error)) (hedge.FanResult[T], error) {
	if read == nil {
		return hedge.FanResult[T]{}, errors.New("hedgehttp: Fan needs a read function")
	}
	leaves := make([]shardLeaf, len(reqs))
	for i, r := range reqs {
		if r == nil || r.URL == nil {
			return hedge.FanResult[T]{}, fmt.Errorf("hedgehttp: Fan: reqs[%d] has no URL: give a request per leaf", i)
		}
		l, err := s.leaf(r)
		if err != nil {
			return hedge.FanResult[T]{}, fmt.Errorf("hedgehttp: Fan: reqs[%d]: %w", i, err)
		}
		leaves[i] = l
	}
	op := "GET"
	if len(reqs) > 0 {
		op = s.t.op(reqs[0])
	}
	return hedge.DoFan(ctx, s.t.h, op, len(reqs), fo, func(ctx context.Context, i int, a hedge.Attempt) (T, error) {
		return sendLeaf(ctx, s.t, leaves[i], a, func(resp *http.Response) (T, error) { return read(i, resp) })
	})
}

// shardLeaf is a request of DoShard or Fan, with how each copy gets its
// body.
type shardLeaf struct {
	req     *http.Request
	getBody func() (io.ReadCloser, error)
}

// leaf checks that req can be copied, and returns it with its body's
// source, or an error matching ErrNotReplayable.
func (s *Shards) leaf(req *http.Request) (shardLeaf, error) {
	if !safeMethod(req.Method) && (!s.t.keyedWrites || idempotencyKey(req.Header) == "") {
		return shardLeaf{}, fmt.Errorf("%w: %s is not GET, HEAD, OPTIONS or TRACE: send a write with an Idempotency-Key header and ShardConfig.HedgeKeyedWrites, or send it with DoShard, which sends it once", ErrNotReplayable, req.Method)
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return shardLeaf{}, fmt.Errorf("%w: its body has no GetBody: make it with http.NewRequest from a bytes.Reader, bytes.Buffer or strings.Reader, or set GetBody", ErrNotReplayable)
	}
	return shardLeaf{req: req, getBody: req.GetBody}, nil
}

// sendLeaf sends copy a of l to server a.Replica and reads its answer
// with read, inside the copy.
func sendLeaf[T any](ctx context.Context, t *Transport, l shardLeaf, a hedge.Attempt, read func(*http.Response) (T, error)) (T, error) {
	var zero T
	out, err := t.copyRequest(ctx, l.req, a, nil, l.getBody, l.req.ContentLength)
	if err != nil {
		return zero, err
	}
	resp, err := t.send(t.base, out, a, "server")
	if err != nil {
		return zero, err
	}
	resp, err = t.classify(resp)
	if err != nil {
		return zero, err
	}
	defer resp.Body.Close()
	return read(resp)
}
