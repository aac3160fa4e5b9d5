package hedgehttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/dialerr"
	"github.com/tailcut/hedge/internal/tiedclient"
	"github.com/tailcut/hedge/internal/wire"
)

// TiedConfig makes a Transport send tied requests (Config.Tied): each
// eligible request goes as two copies to two distinct Replicas, the second
// Gap after the first, carrying tied.IDHeader, tied.SiblingHeader and
// tied.RoleHeader, to servers that run tied.Server's middleware. In the
// default form (tied.FormSpare) the first copy queues as any request and
// the second runs only on a worker free when it arrives, after claiming
// the tie at the first's server, which drops its copy if still queued; in
// tied.FormSymmetric both queue and the first server ready to start its
// copy claims. Either way a call runs once while the servers reach each
// other; the first successful answer wins and the other copy is
// cancelled, as for hedges. A copy answered "dropped" (409 with
// tied.DroppedHeader: for its sibling, or for want of a free worker) is
// not a failure,
// nor is a copy that provably never reached its server: one whose dial
// failed (connection refused, no route, a name that did not resolve)
// before the base transport reported any connection for it (an
// httptrace GotConn), so that no byte of it was written. Such a copy is
// marked tied.ErrNotSent: the call is its twin's, sent at once if the gap
// has not passed, and one replica down fails no call.
//
// Tied requests bypass the Hedger's delay, budget and spare-capacity
// rules: every eligible request is tied, and the servers, which see their
// own queues, decide which copy runs. Eligibility is as for hedging
// (replayable body; GET, HEAD, OPTIONS, TRACE, or a keyed write with
// HedgeKeyedWrites); other requests are sent once through the Hedger.
type TiedConfig struct {
	// Gap is the time between the two copies. Zero means tied.DefaultGap;
	// negative sends both at once.
	Gap time.Duration
	// Form is how the two copies share the work: tied.FormSpare (the
	// zero value: the second copy runs only on a worker free when it
	// arrives, in place of a first copy still queued) or
	// tied.FormSymmetric (both queue; the first to start claims).
	Form tiedclient.Form
	// Picker chooses the two replicas by this Transport's tied copies in
	// flight on each (two choices by default).
	Picker hedge.Picker
	// Addrs, if not nil, has one entry per replica: the address by which
	// the servers reach that replica (an entry of their
	// tied.Config.Peers), sent in tied.SiblingHeader. Nil means the
	// replica's base URL as in Replicas, in normal form
	// ("http://10.0.0.2:8080").
	Addrs []string
}

// tiedState is a Transport's tied client.
type tiedState struct {
	c     *tiedclient.Client
	addrs []string
}

// newTied checks cfg.Tied and returns the Transport's tied client (nil
// without Config.Tied) and the mistakes found.
func newTied(cfg Config, replicas []replica) (*tiedState, []error) {
	tc := cfg.Tied
	if tc == nil {
		return nil, nil
	}
	var errs []error
	if len(cfg.Replicas) < 2 {
		return nil, []error{errors.New("hedgehttp: Config.Tied needs Config.Replicas: list the base URLs of at least two replicas, which run tied.Server's middleware")}
	}
	if tc.Addrs != nil && len(tc.Addrs) != len(cfg.Replicas) {
		errs = append(errs, fmt.Errorf("hedgehttp: Config.Tied.Addrs has %d entries for %d Replicas: give one address per replica, or none", len(tc.Addrs), len(cfg.Replicas)))
	}
	st := &tiedState{}
	for i := range cfg.Replicas {
		a := ""
		switch {
		case tc.Addrs != nil && i < len(tc.Addrs):
			a = tc.Addrs[i]
		case i < len(replicas):
			a = replicas[i].scheme + "://" + replicas[i].host
		}
		n, err := wire.NormalizeAddr(a)
		if err != nil && len(errs) == 0 {
			errs = append(errs, fmt.Errorf("hedgehttp: Config.Tied: address of replica %d: %w", i, err))
		}
		st.addrs = append(st.addrs, n)
	}
	c, err := tiedclient.NewClient(tiedclient.ClientConfig{Replicas: len(cfg.Replicas), Picker: tc.Picker, Gap: tc.Gap, Form: tc.Form})
	if err != nil {
		errs = append(errs, fmt.Errorf("hedgehttp: Config.Tied: %w", err))
	}
	st.c = c
	return st, errs
}

// TiedClient returns the tied client of a Transport made with
// Config.Tied, whose Stats count its tied calls, or nil.
func (t *Transport) TiedClient() *tiedclient.Client {
	if t.tied == nil {
		return nil
	}
	return t.tied.c
}

// roundTripTied sends req as a tied request (see TiedConfig). body is the
// first copy's body (nil: the request's own); getBody makes the second's.
func (t *Transport) roundTripTied(ctx context.Context, req *http.Request, body io.ReadCloser, getBody func() (io.ReadCloser, error), contentLength int64) (*http.Response, error) {
	attempt := func(ctx context.Context, cp tiedclient.Copy) (*http.Response, error) {
		// Copy 1 sent as a primary (copy 0 never reached its server)
		// stands alone.
		a := hedge.Attempt{Index: cp.Index, Replica: cp.Replica, Hedge: cp.Index > 0 && cp.Role != wire.RolePrimary}
		var gotConn atomic.Bool
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) }})
		out, err := t.copyRequest(ctx, req, a, body, getBody, contentLength)
		if err != nil {
			return nil, err
		}
		if cp.Index == 0 {
			out.Header = out.Header.Clone() // the caller's map otherwise
			if out.Header == nil {
				out.Header = make(http.Header)
			}
		}
		out.Header.Set(wire.TiedIDHeader, cp.ID)
		out.Header.Set(wire.TiedSiblingHeader, t.tied.addrs[cp.Sibling])
		if r := cp.Role.String(); r != "" {
			out.Header.Set(wire.TiedRoleHeader, r)
		}
		rt := t.base
		if a.Hedge {
			rt = t.hedgeRT
		}
		resp, err := rt.RoundTrip(out)
		if err != nil {
			if resp != nil {
				closeBody(resp.Body)
			}
			if !gotConn.Load() && dialerr.Is(err) {
				err = hedge.NotSent(err)
			}
			return nil, err
		}
		t.reportLoad(cp.Replica, resp)
		if derr := wire.DroppedError(resp); derr != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			return nil, fmt.Errorf("hedgehttp: copy %d to replica %d: %w", cp.Index, cp.Replica, derr)
		}
		return resp, nil
	}
	resp, release, err := tiedclient.Run(ctx, t.tied.c, attempt, discard)
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &heldBody{rc: resp.Body, release: release}
	return resp, nil
}
