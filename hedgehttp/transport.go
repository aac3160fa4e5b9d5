package hedgehttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/dialerr"
	"github.com/tailcut/hedge/internal/wire"
)

// AttemptHeader is the header that marks a hedge copy: "Hedge-Attempt: N",
// where N is the copy's hedge.Attempt.Index (1 for the first hedge). Only
// a copy sent while another copy of the request runs carries it
// (hedge.Attempt.Hedge). The primary never carries it, even if the
// caller's request did, nor does a copy that stands alone: a failover
// (the first copy never reached a server) or a copy sent after the only
// running copy failed (a 503, say). That copy is the request's primary
// now, and a server that runs hedges at low priority (package spare)
// must serve it as one.
const AttemptHeader = wire.AttemptHeader

// DefaultMaxBodyBuffer is how many bytes of a request body without GetBody
// are buffered for replay when Config.MaxBodyBuffer is zero: 1 MiB.
const DefaultMaxBodyBuffer = 1 << 20

// CredentialScope says where the credentials of a request addressed to
// the service may go when Config.Replicas is set. The zero value is
// OneService.
type CredentialScope int

const (
	// OneService declares the Replicas (and ServiceURLs) one service,
	// trusted with the same credentials: a request addressed to any of
	// them goes, headers and all, to whichever replica the Hedger picks
	// for each copy. Credentials never reach an origin outside that
	// list: a request addressed elsewhere is not rewritten at all. This
	// is the default, because replicas that would not accept the same
	// credentials are not interchangeable.
	OneService CredentialScope = iota

	// PerOrigin declares that each replica has credentials of its own,
	// which must not reach another replica. Since any copy of a request
	// may go to any replica, a request addressed to the service that
	// carries credentials (an Authorization, Proxy-Authorization, Cookie,
	// Cookie2, WWW-Authenticate or Proxy-Authenticate header, one of
	// Config.SensitiveHeaders, header names in any case, or user
	// information in the URL) is refused: RoundTrip sends nothing and
	// returns an error matching ErrCredentialsNotShared, counted in
	// Stats.CredentialsRefused. It is never sent stripped of them.
	PerOrigin
)

// String returns the constant's name.
func (s CredentialScope) String() string {
	switch s {
	case OneService:
		return "OneService"
	case PerOrigin:
		return "PerOrigin"
	}
	return "CredentialScope(" + strconv.Itoa(int(s)) + ")"
}

// ErrCredentialsNotShared is the error, wrapped, of RoundTrip for a request
// addressed to the service that carries credentials while
// Config.CredentialScope is PerOrigin: its copies could reach a replica
// that must not see them. Match it with errors.Is.
var ErrCredentialsNotShared = errors.New("hedgehttp: credentials are not shared among the replicas")

// Config configures a Transport. The zero Config is valid and means: hedge
// copies go to the request's own host on a separate connection pool, only
// GET, HEAD, OPTIONS and TRACE are hedged, bodies without GetBody are
// buffered up to 1 MiB, and the operation class is the method alone.
type Config struct {
	// Replicas, if not empty, lists the base URLs ("https://replica-a.example:8443")
	// of interchangeable backends of one service. Every copy of a
	// request addressed to the service (to the origin of a replica or of
	// one of ServiceURLs), the primary included, goes to the replica the
	// Hedger picks for it (hedge.Attempt.Replica): the request URL's
	// scheme and host are replaced, its path and query kept. A request
	// addressed to any other origin, such as the target of a redirect
	// to another host, is sent once through the base transport as it is,
	// and counted in Stats.OtherOrigins. The Hedger must be made with
	// hedge.Config{Replicas: len(Replicas)} (New checks it). At least two
	// entries, each a scheme (http or https) and a host, nothing else; no
	// two with the same host and port (compared in normal form: names in
	// lower case, default ports explicit, IP addresses parsed).
	// Empty means single-host mode: every copy goes to the request's own
	// URL, hedges through HedgeTransport.
	Replicas []string

	// ServiceURLs lists further base URLs by which callers address the
	// service as a whole, such as the name of its load balancer
	// ("https://api.example"). A request addressed to one of them goes to
	// the Replicas like a request addressed to a replica. Entries are
	// written as replicas are, and are none of the Replicas. It needs
	// Replicas.
	ServiceURLs []string

	// CredentialScope says whether the Replicas share credentials. The
	// zero value, OneService, means they do; PerOrigin means they do not,
	// and then a request addressed to the service that carries
	// credentials is refused with ErrCredentialsNotShared, never sent
	// stripped of them. Either way, a request's credentials go only to
	// the origin it addressed or, if that origin is the service's, to
	// the Replicas. PerOrigin needs Replicas.
	CredentialScope CredentialScope

	// SensitiveHeaders names request headers that carry credentials
	// besides Authorization, Proxy-Authorization, Cookie, Cookie2,
	// WWW-Authenticate and Proxy-Authenticate ("X-Api-Key"); like those,
	// they are matched in any case. It needs CredentialScope PerOrigin,
	// the only scope in which credentials change what is sent.
	SensitiveHeaders []string

	// HedgeTransport is the RoundTripper that hedge copies go through:
	// copies sent while another copy of the request runs
	// (hedge.Attempt.Hedge), not primaries nor a copy that stands
	// alone, such as a failover. Nil means: a Clone of base when base is an
	// *http.Transport and there are no Replicas, so that a hedge gets a
	// connection of its own instead of queueing behind the slow primary's
	// (or sharing its HTTP/2 connection); base itself otherwise. With an
	// opaque base in single-host mode, pass a second, independent
	// instance here to get the same separation.
	HedgeTransport http.RoundTripper

	// MaxBodyBuffer is how many bytes of a request body are buffered for
	// replay when the request has no GetBody. Zero means
	// DefaultMaxBodyBuffer; negative means never buffer. A body that
	// does not fit is sent once, unhedged, and counted in
	// Stats.Unreplayable.
	MaxBodyBuffer int64

	// HedgeKeyedWrites lets requests of methods other than GET, HEAD,
	// OPTIONS and TRACE be hedged when they carry a non-empty
	// Idempotency-Key (or X-Idempotency-Key) header; every copy carries
	// the same key. Without it, such requests are always sent once.
	HedgeKeyedWrites bool

	// Route returns the route template of a request's path
	// ("/items/{id}"), without the method: the Transport puts the method
	// and a space in front of it, so this route makes the operation class
	// "GET /items/{id}" of a GET. A route that begins with the request's
	// method and a space, as a net/http pattern does ("GET /items/{id}"),
	// is the class as it is. Never return the raw path:
	// classes must stay few. A route set with WithRoute on the request's
	// context takes precedence. Nil, or "", means the operation class is
	// the method alone.
	Route func(*http.Request) string

	// Tied, if not nil, sends eligible requests as tied requests to
	// servers that run tied.Server's middleware, instead of hedging them:
	// see TiedConfig. It needs Replicas.
	Tied *TiedConfig
}

// Transport is an http.RoundTripper that hedges requests with a
// *hedge.Hedger: see the package doc for the rules. It is safe for
// concurrent use. Make one with New.
type Transport struct {
	base, hedgeRT http.RoundTripper
	h             *hedge.Hedger
	replicas      []replica
	service       map[origin]bool // the origins of Replicas and ServiceURLs
	perOrigin     bool
	sensitive     []string
	maxBody       int64
	keyedWrites   bool
	route         func(*http.Request) string
	tied          *tiedState // Config.Tied; nil without

	unreplayable atomic.Int64
	writesOnce   atomic.Int64
	pushbacks    atomic.Int64
	retryStatus  atomic.Int64
	otherOrigins atomic.Int64
	refused      atomic.Int64
	loadReports  atomic.Int64
	badReports   atomic.Int64
}

// replica is where a copy sent to one of Config.Replicas goes: the scheme
// and Host of its URL, in normal form.
type replica struct {
	scheme, host string
}

// New returns a Transport that hedges requests sent through base (nil
// means http.DefaultTransport) with h. The error lists every mistake in
// cfg, each with what to do about it.
func New(base http.RoundTripper, h *hedge.Hedger, cfg Config) (*Transport, error) {
	var errs []error
	if h == nil {
		errs = append(errs, errors.New("hedgehttp: the *hedge.Hedger is nil: make one with hedge.New (one per backend) and pass it"))
	}
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{
		base:        base,
		hedgeRT:     cfg.HedgeTransport,
		h:           h,
		perOrigin:   cfg.CredentialScope == PerOrigin,
		sensitive:   slices.Clone(cfg.SensitiveHeaders),
		maxBody:     cfg.MaxBodyBuffer,
		keyedWrites: cfg.HedgeKeyedWrites,
		route:       cfg.Route,
	}
	if t.maxBody == 0 {
		t.maxBody = DefaultMaxBodyBuffer
	}
	errs = append(errs, t.parseService(cfg)...)
	errs = append(errs, checkCredentials(cfg)...)
	var terrs []error
	t.tied, terrs = newTied(cfg, t.replicas)
	errs = append(errs, terrs...)
	if h != nil && h.Replicas() != len(cfg.Replicas) {
		if n := len(cfg.Replicas); n == 0 {
			errs = append(errs, fmt.Errorf("hedgehttp: the Hedger picks among %d replicas but Config.Replicas is empty: make the Hedger with hedge.Config{Replicas: 0}, or list the replicas' base URLs", h.Replicas()))
		} else {
			errs = append(errs, fmt.Errorf("hedgehttp: Config.Replicas lists %d base URLs but the Hedger has %d replicas: make it with hedge.Config{Replicas: %d}", n, h.Replicas(), n))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if t.hedgeRT == nil {
		t.hedgeRT = base
		if b, ok := base.(*http.Transport); ok && len(t.replicas) == 0 {
			t.hedgeRT = b.Clone()
		}
	}
	return t, nil
}

// parseService parses cfg.Replicas and cfg.ServiceURLs into t and returns
// their mistakes.
func (t *Transport) parseService(cfg Config) []error {
	var errs []error
	switch len(cfg.Replicas) {
	case 0:
		if len(cfg.ServiceURLs) > 0 {
			errs = append(errs, errors.New("hedgehttp: Config.ServiceURLs is set but Config.Replicas is empty: service URLs name a replicated service; list its replicas, or drop ServiceURLs"))
		}
		return errs
	case 1:
		errs = append(errs, fmt.Errorf("hedgehttp: Config.Replicas has a single entry %q: a hedge needs another replica; list at least two, or none to hedge to the request's own host", cfg.Replicas[0]))
	}
	t.service = map[origin]bool{}
	backends := map[string]int{} // host and port: its index in Replicas
	for i, s := range cfg.Replicas {
		o, err := parseReplica(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("hedgehttp: Config.Replicas[%d]: %w", i, err))
			continue
		}
		if j, dup := backends[o.backend()]; dup {
			errs = append(errs, fmt.Errorf("hedgehttp: Config.Replicas[%d] = %q repeats the backend of Replicas[%d] = %q (host and port %s): a hedge could land on the server that holds the primary; list each replica once", i, s, j, cfg.Replicas[j], o.backend()))
			continue
		}
		backends[o.backend()] = i
		t.service[o] = true
		t.replicas = append(t.replicas, replica{scheme: o.scheme, host: o.hostport()})
	}
	aliases := map[origin]int{}
	for i, s := range cfg.ServiceURLs {
		o, err := parseReplica(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("hedgehttp: Config.ServiceURLs[%d]: %w", i, err))
			continue
		}
		if j, dup := aliases[o]; dup {
			errs = append(errs, fmt.Errorf("hedgehttp: Config.ServiceURLs[%d] = %q repeats ServiceURLs[%d]: list it once", i, s, j))
			continue
		}
		aliases[o] = i
		if t.service[o] {
			errs = append(errs, fmt.Errorf("hedgehttp: Config.ServiceURLs[%d] = %q is one of the Replicas, which belong to the service already: drop it from ServiceURLs", i, s))
		}
		t.service[o] = true
	}
	return errs
}

// checkCredentials returns the mistakes in cfg's credential settings.
func checkCredentials(cfg Config) []error {
	var errs []error
	switch cfg.CredentialScope {
	case OneService:
		if len(cfg.SensitiveHeaders) > 0 {
			errs = append(errs, fmt.Errorf("hedgehttp: Config.SensitiveHeaders %q is set but CredentialScope is OneService, under which every header travels among the replicas as it is: set CredentialScope: hedgehttp.PerOrigin to refuse requests that carry them, or drop SensitiveHeaders", cfg.SensitiveHeaders))
		}
	case PerOrigin:
		if len(cfg.Replicas) == 0 {
			errs = append(errs, errors.New("hedgehttp: Config.CredentialScope is PerOrigin but Config.Replicas is empty: with one host every copy goes to the request's own origin; drop CredentialScope, or list the replicas"))
		}
	default:
		errs = append(errs, fmt.Errorf("hedgehttp: Config.CredentialScope is %v: use hedgehttp.OneService (the default) or hedgehttp.PerOrigin", cfg.CredentialScope))
	}
	for i, name := range cfg.SensitiveHeaders {
		if !validHeaderName(name) {
			errs = append(errs, fmt.Errorf("hedgehttp: Config.SensitiveHeaders[%d] = %q is not a header name: write the name alone, such as X-Api-Key", i, name))
		}
	}
	return errs
}

// Hedger returns the Hedger the Transport was made with, whose Stats hold
// the per-operation counters and latencies of its requests.
func (t *Transport) Hedger() *hedge.Hedger { return t.h }

// Stats counts what the Transport decided on its own, beside the Hedger's
// per-operation Stats. Counters only grow.
type Stats struct {
	// Unreplayable counts requests sent once because their body could
	// not be replayed: no GetBody, and larger than MaxBodyBuffer (or
	// buffering disabled). The Hedger counts them in Unhedgeable too.
	Unreplayable int64
	// WritesOnce counts requests of other methods than GET, HEAD, OPTIONS
	// and TRACE sent once: no Idempotency-Key, or HedgeKeyedWrites unset.
	// The Hedger counts them in Unhedgeable too.
	WritesOnce int64
	// Pushbacks counts copies answered with pushback (429, or a 5xx with
	// Retry-After), which ended hedging of their request.
	Pushbacks int64
	// RetryableStatus counts copies answered 502, 503 or 504 without
	// Retry-After (and a body of at most 64 KiB), which the Hedger may
	// follow with another copy at once.
	RetryableStatus int64
	// OtherOrigins counts requests, with Config.Replicas, addressed to an
	// origin outside the service (neither a replica nor one of
	// ServiceURLs), such as the target of a redirect: each was sent once,
	// as it was, through the base transport. The Hedger does not see
	// them.
	OtherOrigins int64
	// CredentialsRefused counts requests refused with
	// ErrCredentialsNotShared (see Config.CredentialScope): nothing was
	// sent.
	CredentialsRefused int64
	// LoadReports counts answers of replicas (with Config.Replicas) that
	// carried a load report (loadreport.Header) which the Transport read
	// and passed to the Hedger as that replica's (hedge.Hedger.ReportLoad),
	// whatever their status.
	LoadReports int64
	// BadLoadReports counts answers of replicas whose load report the
	// Transport could not read: malformed (loadreport.ErrMalformed), or
	// reporting none of the keys it reads (loadreport.ErrNoReport). Each
	// report was ignored, and its answer taken as if it carried none.
	BadLoadReports int64
}

// Stats returns a snapshot of the Transport's own counters.
func (t *Transport) Stats() Stats {
	return Stats{
		Unreplayable:       t.unreplayable.Load(),
		WritesOnce:         t.writesOnce.Load(),
		Pushbacks:          t.pushbacks.Load(),
		RetryableStatus:    t.retryStatus.Load(),
		OtherOrigins:       t.otherOrigins.Load(),
		CredentialsRefused: t.refused.Load(),
		LoadReports:        t.loadReports.Load(),
		BadLoadReports:     t.badReports.Load(),
	}
}

// reportLoad passes the load report that resp, the answer of a copy sent
// to replica, carries to the Hedger, and counts it. A report it cannot
// read is counted and ignored. Without Replicas (replica -1), reports are
// not read: no replica to pin them on.
func (t *Transport) reportLoad(replica int, resp *http.Response) {
	if replica < 0 || replica >= len(t.replicas) {
		return
	}
	v := resp.Header[wire.LoadHeader] // the client canonicalizes keys, and Header is canonical
	if len(v) == 0 || v[0] == "" {
		return
	}
	l, err := wire.ParseLoad(v[0])
	if err != nil {
		t.badReports.Add(1)
		return
	}
	t.loadReports.Add(1)
	t.h.ReportLoad(replica, l)
	if t.tied != nil {
		t.tied.c.ReportLoad(replica, l)
	}
}

// CloseIdleConnections closes the idle connections of the base transport
// and of the hedge transport, if they have such a method. http.Client's
// CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	type closer interface{ CloseIdleConnections() }
	if c, ok := t.base.(closer); ok {
		c.CloseIdleConnections()
	}
	if t.hedgeRT != t.base {
		if c, ok := t.hedgeRT.(closer); ok {
			c.CloseIdleConnections()
		}
	}
}

type routeKey struct{}

// WithRoute attaches the route template of a request's path
// ("/items/{id}", without the method) to ctx, for the operation class
// (see Config.Route): the class of a GET with this route is
// "GET /items/{id}". Pass a template, never a raw path: every distinct
// route is a class with its own state, up to the Hedger's MaxOps.
func WithRoute(ctx context.Context, route string) context.Context {
	return context.WithValue(ctx, routeKey{}, route)
}

// AttemptIndex returns the hedge attempt index a server sees in a request's
// Hedge-Attempt header: 0 for a primary copy (no header, or a header that
// is not a positive number), N for the N-th hedge.
func AttemptIndex(r *http.Request) int { return wire.AttemptIndex(r) }

// op returns the operation class of req.
func (t *Transport) op(req *http.Request) string {
	m := req.Method
	if m == "" {
		m = http.MethodGet
	}
	route, _ := req.Context().Value(routeKey{}).(string)
	if route == "" && t.route != nil {
		route = t.route(req)
	}
	switch {
	case route == "":
		return m
	case len(route) > len(m) && route[len(m)] == ' ' && route[:len(m)] == m:
		// The route names the method already, as net/http's patterns do
		// ("GET /items/{id}"): not "GET GET /items/{id}".
		return route
	}
	return m + " " + route
}

// safeMethod reports whether m may be hedged without a key.
func safeMethod(m string) bool {
	switch m {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// idempotencyKey returns the request's idempotency key header, or "".
func idempotencyKey(h http.Header) string {
	if k := h.Get("Idempotency-Key"); k != "" {
		return k
	}
	return h.Get("X-Idempotency-Key")
}

// sendOnce marks ctx so that the Hedger sends one copy, whatever key an
// outer caller may have attached with hedge.WithIdempotencyKey.
func sendOnce(ctx context.Context) context.Context {
	return hedge.NotIdempotent(hedge.WithIdempotencyKey(ctx, ""))
}

// RoundTrip sends req, and hedge copies of it when it is slow, as the
// package doc describes. It never modifies req and always closes its body.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req.Body)
		return nil, errors.New("hedgehttp: nil Request.URL")
	}
	if req.Header["Upgrade"] != nil {
		// A protocol switch (WebSocket) is one connection, never copied,
		// and its response body must stay writable: hand it over whole.
		return t.base.RoundTrip(req)
	}
	if t.service != nil {
		if o, ok := originOf(req.URL); !ok || !t.service[o] {
			// Not the service's: a redirect's target, say. Its path must
			// not reach the replicas, nor its credentials.
			t.otherOrigins.Add(1)
			return t.base.RoundTrip(req)
		}
		if t.perOrigin {
			if creds := t.credentials(req); creds != nil {
				closeBody(req.Body)
				t.refused.Add(1)
				return nil, fmt.Errorf("%w: the request carries %s and Config.CredentialScope is PerOrigin, so its copies, which may go to any replica, may not carry them; send it through a Transport without Replicas, or declare the replicas one service (CredentialScope OneService)", ErrCredentialsNotShared, strings.Join(creds, ", "))
			}
		}
	}
	ctx := req.Context()
	once := false
	if !safeMethod(req.Method) {
		if key := idempotencyKey(req.Header); key != "" && t.keyedWrites {
			ctx = hedge.WithIdempotencyKey(hedge.NotIdempotent(ctx), key)
		} else {
			ctx, once = sendOnce(ctx), true
			t.writesOnce.Add(1)
		}
	}

	// How each copy gets its body: the primary takes body (nil: the
	// request's own), hedges call getBody.
	var body io.ReadCloser
	getBody := req.GetBody
	contentLength := req.ContentLength
	if !once && req.Body != nil && req.Body != http.NoBody && getBody == nil {
		buf, rest, err := t.buffer(req)
		switch {
		case err != nil:
			return nil, err
		case rest != nil:
			// Too large: sent once, with what was read put back in front.
			body = rest
			ctx = sendOnce(ctx)
			t.unreplayable.Add(1)
		default:
			getBody = func() (io.ReadCloser, error) { return bufferBody(buf), nil }
			body = bufferBody(buf)
			contentLength = int64(len(buf))
		}
	}

	if t.tied != nil && !once && (getBody != nil || req.Body == nil || req.Body == http.NoBody) {
		return t.roundTripTied(ctx, req, body, getBody, contentLength)
	}
	rt := &roundTrip{Context: ctx, t: t, req: req, body: body, getBody: getBody, contentLength: contentLength}
	resp, release, err := hedge.DoHeld(rt, t.h, t.op(req), sendCopy, discard)
	if err != nil {
		release()
		if req.Context().Err() == nil {
			if fr := lastFailedResponse(err); fr != nil {
				return fr, nil
			}
		}
		return nil, err
	}
	rt.held = heldBody{rc: resp.Body, release: release}
	resp.Body = &rt.held
	return resp, nil
}

// roundTrip is what the copies of one RoundTrip share: the request, how a
// copy gets its body, and, once a copy won, its held body. It is also the
// context that RoundTrip hands the Hedger, the caller's with nothing
// changed but the roundTrip itself as a value, so that every copy's
// context leads sendCopy to it. This way one allocation carries what a
// closure over the request and a separate held body would cost two for,
// on every request.
type roundTrip struct {
	context.Context // the caller's, with the Hedger's marks
	t               *Transport
	req             *http.Request
	body            io.ReadCloser // the primary's body; nil: the request's own
	getBody         func() (io.ReadCloser, error)
	contentLength   int64
	held            heldBody // the winner's body, once there is one
}

type roundTripKey struct{}

// Value returns the roundTrip itself for roundTripKey, and the caller's
// values for other keys.
func (rt *roundTrip) Value(key any) any {
	if key == (roundTripKey{}) {
		return rt
	}
	return rt.Context.Value(key)
}

// String names the context after its parent, as package context does.
func (rt *roundTrip) String() string {
	if s, ok := rt.Context.(interface{ String() string }); ok {
		return s.String() + ".WithValue(hedgehttp round trip)"
	}
	return "hedgehttp round trip"
}

// sendCopy is the attempt function of every RoundTrip: it sends one copy
// of the request whose roundTrip ctx leads to.
func sendCopy(ctx context.Context, a hedge.Attempt) (*http.Response, error) {
	rt := ctx.Value(roundTripKey{}).(*roundTrip)
	t := rt.t
	out, err := t.copyRequest(ctx, rt.req, a, rt.body, rt.getBody, rt.contentLength)
	if err != nil {
		return nil, err
	}
	base := t.base
	if a.Hedge {
		base = t.hedgeRT
	}
	resp, err := t.send(base, out, a, "replica")
	if err != nil {
		return nil, err
	}
	return t.classify(resp)
}

// send sends copy a, out, to a.Replica through base. The error of a
// failed dial is marked so that the Hedger sends the copy elsewhere at
// once; a copy the server dropped for want of spare capacity is an
// error that sends no further copy. to names a.Replica in that error:
// "replica" or "server".
func (t *Transport) send(base http.RoundTripper, out *http.Request, a hedge.Attempt, to string) (*http.Response, error) {
	resp, err := base.RoundTrip(out)
	if err != nil {
		if resp != nil {
			closeBody(resp.Body)
		}
		// No connection, so no byte of the request reached a server:
		// the Hedger sends it to another replica at once.
		return nil, dialerr.Mark(err)
	}
	t.reportLoad(a.Replica, resp)
	if derr := wire.DroppedError(resp); derr != nil {
		// A server that runs hedges on spare capacity only (package
		// spare) had none for this copy: no further copy, and the
		// others go on.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return nil, hedge.PushbackAfter(fmt.Errorf("hedgehttp: copy %d to %s %d: %w", a.Index, to, a.Replica, derr), -1)
	}
	return resp, nil
}

// copyRequest builds the request of one copy. The primary is a shallow
// copy with its own context (req.WithContext), deep-copying only what it
// changes; a hedge is a full req.Clone with a fresh body from getBody.
func (t *Transport) copyRequest(ctx context.Context, req *http.Request, a hedge.Attempt, body io.ReadCloser, getBody func() (io.ReadCloser, error), contentLength int64) (*http.Request, error) {
	var rep *replica
	if len(t.replicas) > 0 {
		rep = &t.replicas[a.Replica] // New checked h.Replicas() == len(t.replicas)
	}
	var out *http.Request
	if a.Index == 0 {
		out = req.WithContext(ctx)
		if body != nil {
			out.Body = body
		}
	} else {
		out = req.Clone(ctx)
		if req.Body != nil && req.Body != http.NoBody {
			if getBody == nil {
				// Not reachable: the Hedger sends hedges only for
				// requests with a replayable body.
				return nil, errors.New("hedgehttp: request body cannot be replayed for a hedge")
			}
			b, err := getBody()
			if err != nil {
				return nil, fmt.Errorf("hedgehttp: GetBody for hedge %d: %w", a.Index, err)
			}
			out.Body = b
		}
	}
	out.GetBody = getBody
	out.ContentLength = contentLength

	if rep != nil {
		u := *req.URL
		u.Scheme, u.Host = rep.scheme, rep.host
		out.URL = &u
		if req.Host == "" || req.Host == req.URL.Host {
			out.Host = "" // follow the URL; an explicit override is kept
		}
	}
	switch {
	case a.Hedge:
		if out.Header == nil {
			out.Header = make(http.Header)
		}
		out.Header.Set(AttemptHeader, strconv.Itoa(a.Index))
	case a.Index > 0:
		// A copy that stands alone is the request's primary: out's
		// header is its own (req.Clone).
		delete(out.Header, AttemptHeader)
	case req.Header[AttemptHeader] != nil:
		// The primary shares the caller's header map until it changes it.
		out.Header = req.Header.Clone()
		delete(out.Header, AttemptHeader)
	}
	return out, nil
}
