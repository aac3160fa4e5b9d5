package tied

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/wire"
	"github.com/tailcut/hedge/loadreport"
)

// Handler returns net/http middleware that runs each request through the
// Server's queue (see Admit) before next, and serves claims from peers
// itself (see ClaimHandler): a request to the claim path
// (Config.ClaimPath, DefaultClaimPath) never reaches next. When the claim
// path is DefaultClaimPath or DefaultCancelPath, a request to either of
// the two is a claim, so that peers of earlier versions, which post to
// DefaultCancelPath, are answered.
//
// A request with a malformed IDHeader, SiblingHeader or RoleHeader runs
// untied (counted in Stats.BadTie). A request refused because the queue
// is full is answered 503 Service Unavailable with RefusedHeader
// "queue-full"; a tied copy dropped because its sibling had the right to
// start, 409 Conflict with DroppedHeader "sibling"; a spare copy that
// found no free worker, 409 with DroppedHeader "no-spare"; a request
// whose client went away while it waited, nothing.
//
// Every response, claims' answers included, carries the Server's load
// report (loadreport.Header, "Endpoint-Load-Metrics"), set just before
// its status is written, so that clients whose transport reads it
// (hedgehttp.Transport) see the server's load rather than their own
// requests' alone: the Server's Load, less the request answered when it
// holds a worker.
func (s *Server) Handler(next http.Handler) http.Handler {
	claims := s.ClaimHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// holding is set once the request holds a worker: its report is
		// of the others.
		holding := false
		rw := loadreport.NewWriter(w, func() hedge.Load {
			ld := s.Load()
			if holding {
				ld.Running = max(0, ld.Running-1)
			}
			return ld
		})
		defer rw.Finish() // for the answers below that write nothing
		w = rw
		if s.ServesClaims(r.URL.Path) {
			claims.ServeHTTP(w, r)
			return
		}
		t, err := ParseTieRole(r.Header.Get(IDHeader), r.Header.Get(SiblingHeader), r.Header.Get(RoleHeader))
		if err != nil {
			s.CountBadTie()
		}
		release, err := s.Admit(r.Context(), t)
		switch {
		case errors.Is(err, ErrQueueFull):
			w.Header().Set(RefusedHeader, wire.RefusedQueueFull)
			http.Error(w, "server busy: its queue is full; retry later or elsewhere", http.StatusServiceUnavailable)
			return
		case errors.Is(err, ErrNoSpare):
			w.Header().Set(DroppedHeader, DroppedNoSpare)
			http.Error(w, "no spare capacity: no worker was free for this spare copy; its primary has the call", http.StatusConflict)
			return
		case errors.Is(err, ErrDropped):
			w.Header().Set(DroppedHeader, DroppedSibling)
			http.Error(w, "dropped: the sibling copy of this tied request started first", http.StatusConflict)
			return
		case err != nil:
			return // the client is gone
		}
		holding = true
		defer release()
		next.ServeHTTP(w, r)
		rw.Finish() // while the worker is held, as holding says
	})
}

// ServesClaims reports whether Handler takes a request to path for a
// claim (and answers it itself): path is the claim path, or the claim
// path is DefaultClaimPath or DefaultCancelPath and path is one of the
// two. Middleware in front of Handler that must tell claims from the
// application's requests, to count requests say, asks it rather than
// comparing paths, so that it follows the claim path's names.
func (s *Server) ServesClaims(path string) bool {
	if path == s.claimPath {
		return true
	}
	isDefault := func(p string) bool { return p == DefaultClaimPath || p == DefaultCancelPath }
	return isDefault(s.claimPath) && isDefault(path)
}

// ClaimHandler returns the handler of claims from peers, for a server
// that mounts it itself (at the path its peers' HTTPSender posts to)
// rather than through Handler. It accepts only POST with the claim
// (Claim.Sign) as the body, and answers 200 with the verdict's name ("go"
// or "lost"), 403 Forbidden for a message refused by VerifyClaim, 405 for
// other methods. Claims bypass the queue: they are answered at once.
func (s *Server) ClaimHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "claims are POSTed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxMessageLen+1))
		if err != nil {
			http.Error(w, "reading the claim failed", http.StatusBadRequest)
			return
		}
		v, err := s.ReceiveClaim(strings.TrimSpace(string(body)))
		if err != nil {
			http.Error(w, "claim refused", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, v.String())
	})
}

// CancelHandler is the earlier name of ClaimHandler, and returns the same
// handler.
//
// Deprecated: use ClaimHandler.
func (s *Server) CancelHandler() http.Handler { return s.ClaimHandler() }

// HTTPSender is the Sender of Server.Handler's peers: it POSTs each claim
// to the peer's base URL followed by the claim path, on kept-alive
// connections.
type HTTPSender struct {
	client *http.Client
	own    *http.Transport // the transport made for it, closed by CloseIdleConnections
	path   string
}

// NewHTTPSender returns an HTTPSender that posts through rt (nil means a
// transport of its own, a clone of http.DefaultTransport's settings) to
// path on each peer ("" means DefaultClaimPath).
func NewHTTPSender(rt http.RoundTripper, path string) *HTTPSender {
	s := &HTTPSender{path: path}
	if s.path == "" {
		s.path = DefaultClaimPath
	}
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		t.IdleConnTimeout = 30 * time.Second
		s.own, rt = t, t
	}
	s.client = &http.Client{Transport: rt}
	return s
}

// ErrClaimStatus is wrapped by the error of a claim that a peer answered
// with a status other than 200.
var ErrClaimStatus = errors.New("tied: the peer refused the claim")

// ErrCancelStatus is the earlier name of ErrClaimStatus: the same error,
// so errors.Is matches either.
//
// Deprecated: use ErrClaimStatus.
var ErrCancelStatus = ErrClaimStatus

// SendClaim posts msg to addr + the claim path and returns the body of
// the peer's answer.
func (s *HTTPSender) SendClaim(ctx context.Context, addr, msg string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, addr+s.path, strings.NewReader(msg))
	if err != nil {
		return "", fmt.Errorf("tied: claim to %s: %w", addr, err)
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := s.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("tied: claim to %s: %w", addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return "", fmt.Errorf("tied: claim to %s: reading the answer: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w: %s answered %s", ErrClaimStatus, addr, resp.Status)
	}
	return string(b), nil
}

// CloseIdleConnections closes the idle connections of the sender's own
// transport. Server.Close calls it.
func (s *HTTPSender) CloseIdleConnections() {
	if s.own != nil {
		s.own.CloseIdleConnections()
	}
}

// IsDropped reports whether resp is the answer to a tied copy dropped by
// its sibling, or a spare copy refused for want of a free worker: 409
// with DroppedHeader.
func IsDropped(resp *http.Response) bool { return wire.IsDropped(resp) }

// DroppedError returns the error that the answer resp stands for when it
// is a dropped copy's (see IsDropped): ErrNoSpare for a spare copy that
// found no free worker, ErrDropped otherwise; nil when resp is no such
// answer.
func DroppedError(resp *http.Response) error { return wire.DroppedError(resp) }
