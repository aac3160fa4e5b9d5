package hedgegrpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/tiedclient"
	"github.com/tailcut/hedge/internal/wire"
)

// TiedConfig configures tied calls (WithTied).
type TiedConfig struct {
	// Gap is the time between a call's two copies. Zero means
	// tied.DefaultGap; negative sends both at once.
	Gap time.Duration
	// Form is how the two copies share the work: tied.FormSpare (the
	// zero value: the second copy runs only on a worker free when it
	// arrives, in place of a first copy still queued) or
	// tied.FormSymmetric (both queue; the first to start claims).
	Form tiedclient.Form
	// Picker chooses the two conns of a call by the Interceptor's tied
	// copies in flight on each (two choices by default).
	Picker hedge.Picker
	// Addrs, if not nil, has one entry per conn of WithReplicas: the
	// address by which the servers reach that replica (an entry of their
	// tied.Config.Peers), sent as tied.SiblingKey metadata. Nil means
	// each conn's Target().
	Addrs []string
}

// WithTied makes the Interceptor send tied calls instead of hedging: each
// unary call of a method it would hedge goes as two copies to two distinct
// conns of WithReplicas (which it needs), the second Gap after the first,
// with tied.IDKey, tied.SiblingKey and tied.RoleKey metadata, to servers
// that run tiedgrpc.UnaryServerInterceptor. In the default form
// (tied.FormSpare) the first copy queues as any call and the second runs
// only on a worker free when it arrives, after claiming the tie at the
// first's server, which drops its copy if still queued; in
// tied.FormSymmetric both queue and the first server ready to start its
// copy claims. Either way a call runs once while the servers reach each
// other; the first successful answer wins and the other copy is
// cancelled. A copy answered Aborted with a tied.DroppedKey trailer (for
// its sibling, or for want of a free worker) is not a failure of the
// call.
//
// Tied calls bypass the Hedger's delay, budget and spare-capacity rules:
// the servers, which see their queues, decide which copy runs.
func WithTied(cfg TiedConfig) Option {
	return func(o *options) { o.tied = &cfg }
}

// tiedState is an Interceptor's tied client.
type tiedState struct {
	c     *tiedclient.Client
	addrs []string
}

// newTiedState checks the WithTied options.
func newTiedState(o options) (*tiedState, error) {
	if o.tied == nil {
		return nil, nil
	}
	if len(o.conns) < 2 {
		return nil, errors.New("hedgegrpc: WithTied needs WithReplicas with at least two conns, one per replica")
	}
	cfg := o.tied
	if cfg.Addrs != nil && len(cfg.Addrs) != len(o.conns) {
		return nil, fmt.Errorf("hedgegrpc: WithTied: Addrs has %d entries for %d conns: give one per conn, or none", len(cfg.Addrs), len(o.conns))
	}
	st := &tiedState{}
	for i, cc := range o.conns {
		a := cc.Target()
		if cfg.Addrs != nil {
			a = cfg.Addrs[i]
		}
		n, err := wire.NormalizeAddr(a)
		if err != nil {
			return nil, fmt.Errorf("hedgegrpc: WithTied: address of conn %d: %w", i, err)
		}
		st.addrs = append(st.addrs, n)
	}
	c, err := tiedclient.NewClient(tiedclient.ClientConfig{Replicas: len(o.conns), Picker: cfg.Picker, Gap: cfg.Gap, Form: cfg.Form})
	if err != nil {
		return nil, fmt.Errorf("hedgegrpc: WithTied: %w", err)
	}
	st.c = c
	return st, nil
}

// TiedClient returns the tied client of an Interceptor made with
// WithTied, whose Stats count its tied calls, or nil.
func (ic *Interceptor) TiedClient() *tiedclient.Client {
	if ic.tied == nil {
		return nil
	}
	return ic.tied.c
}

// tiedCall runs c as a tied call.
func (c *call) tiedCall(ctx context.Context) error {
	st := c.ic.tied
	attempt := func(ctx context.Context, cp tiedclient.Copy) (int, error) {
		ctx = metadata.AppendToOutgoingContext(ctx, wire.TiedIDKey, cp.ID, wire.TiedSiblingKey, st.addrs[cp.Sibling])
		if r := cp.Role.String(); r != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, wire.TiedRoleKey, r)
		}
		// Copy 1 sent as a primary (copy 0 never reached its server)
		// stands alone.
		i, err := c.attempt(ctx, hedge.Attempt{Index: cp.Index, Replica: cp.Replica, Hedge: cp.Index > 0 && cp.Role != wire.RolePrimary})
		if err != nil && status.Code(err) == codes.Aborted {
			if why := c.copies[cp.Index].trailer.Get(wire.TiedDroppedKey); len(why) > 0 {
				derr := wire.ErrTiedDropped
				if why[0] == wire.DroppedNoSpare {
					derr = wire.ErrTiedNoSpare
				}
				return i, fmt.Errorf("hedgegrpc: copy %d: %w", cp.Index, derr)
			}
		}
		return i, err
	}
	i, release, err := tiedclient.Run(ctx, st.c, attempt, nil)
	release()
	if err != nil {
		var se interface{ GRPCStatus() *status.Status }
		switch {
		case errors.As(err, &se):
			err = se.GRPCStatus().Err()
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			err = status.FromContextError(err).Err()
		default:
			err = status.Error(codes.Unavailable, err.Error())
		}
		if c.special {
			c.deliver(nil, err)
		}
		return err
	}
	return c.finish(i, nil)
}

var _ grpc.UnaryClientInterceptor = (&Interceptor{}).Unary
