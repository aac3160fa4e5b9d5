package bench

import (
	"context"
	"fmt"
	"net/http"

	"github.com/tailcut/hedge"
)

// LeafReader is implemented by backends whose reads hedge.DoFan can send
// itself, one copy at a time, rather than through a hedging transport: a
// fan-out call decides for all its leaves at once.
type LeafReader interface {
	// NewLeafReader returns a function that reads key k from replica r
	// once, unhedged, and a function that releases its connections.
	NewLeafReader() (read func(ctx context.Context, r, k int) error, release func(), err error)
}

// fanCallClient sends each request as one hedge.DoFan of w leaves through
// a Hedger of its own: request i reads keys i*w to i*w+w-1.
type fanCallClient struct {
	h       *hedge.Hedger
	f       hedge.FanOut
	w       int
	read    func(ctx context.Context, r, k int) error
	release func()
}

// newFanCallClient makes a fan-out call client over b, whose Hedger is
// cfg's (its Replicas set to b's).
func newFanCallClient(b Backend, cfg hedge.Config, f hedge.FanOut, w int) (Client, error) {
	lr, ok := b.(LeafReader)
	if !ok {
		return nil, fmt.Errorf("the %s backend cannot send hedge.DoFan's leaves itself (it has no LeafReader): use a per-leaf configuration", b.Name())
	}
	h, err := hedge.New(cfg)
	if err != nil {
		return nil, err
	}
	read, release, err := lr.NewLeafReader()
	if err != nil {
		return nil, err
	}
	return &fanCallClient{h: h, f: f, w: max(w, 1), read: read, release: release}, nil
}

// fanOp is the operation class of the fan-out calls' leaves.
const fanOp = "leaf"

func (c *fanCallClient) Do(ctx context.Context, i int) error {
	_, err := hedge.DoFan(ctx, c.h, fanOp, c.w, c.f, func(ctx context.Context, j int, a hedge.Attempt) (struct{}, error) {
		return struct{}{}, c.read(ctx, a.Replica, (i*c.w+j)%Keys)
	})
	return err
}

// Stats are the Hedger's counters: they count leaves, as FanOut's do.
func (c *fanCallClient) Stats() ClientStats { return HedgerStats(c.h.OpStats(fanOp)) }

func (c *fanCallClient) Close() error {
	c.release()
	return nil
}

// NewLeafReader reads a key from one replica over a transport of its own.
func (b *HTTPBackend) NewLeafReader() (func(ctx context.Context, r, k int) error, func(), error) {
	base, _ := NewCountingTransport()
	if b.h2c {
		base.Protocols = new(http.Protocols)
		base.Protocols.SetUnencryptedHTTP2(true)
	}
	urls := make([][]string, len(b.urls))
	for r, u := range b.urls {
		urls[r] = ItemURLs(u)
	}
	read := func(ctx context.Context, r, k int) error { return HTTPGet(ctx, base, urls[r][k]) }
	return read, base.CloseIdleConnections, nil
}
