package tied

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tailcut/hedge/internal/wire"
)

// IDHeader is the request header that makes a request tied: its value is
// the tie identifier, shared by both copies of the request (see NewID).
const IDHeader = wire.TiedIDHeader

// SiblingHeader is the request header that names where the other copy of a
// tied request was sent: the address by which this server reaches the
// sibling's server, one of the server's Config.Peers ("http://10.0.0.2:8080"
// for HTTP, "10.0.0.2:9090" for gRPC).
const SiblingHeader = wire.TiedSiblingHeader

// DroppedHeader is the response header (gRPC: trailer) set, with the value
// "sibling", on the answer to a copy that its server dropped without
// running it because the sibling copy started first. HTTP answers such a
// copy 409 Conflict, gRPC with code Aborted; the header tells this answer
// from a 409 or Aborted of the service itself.
const DroppedHeader = wire.TiedDroppedHeader

// RefusedHeader is the response header set, with the value "queue-full",
// on the 503 Service Unavailable answer (gRPC: ResourceExhausted) to a
// request refused because the server's queue was full.
const RefusedHeader = wire.TiedRefusedHeader

// RoleHeader is the request header that gives a tied copy its role in
// the spare form (see Role): "primary" or "spare". Without it a tied copy
// takes part in the symmetric form.
const RoleHeader = wire.TiedRoleHeader

// IDKey, SiblingKey, RoleKey and DroppedKey are the gRPC metadata keys of
// IDHeader, SiblingHeader, RoleHeader and DroppedHeader (gRPC metadata
// keys are lower case).
const (
	IDKey      = wire.TiedIDKey
	SiblingKey = wire.TiedSiblingKey
	RoleKey    = wire.TiedRoleKey
	DroppedKey = wire.TiedDroppedKey
)

// The values of DroppedHeader (and DroppedKey): why a copy did not run.
const (
	// DroppedSibling: the sibling copy had the right to start.
	DroppedSibling = wire.DroppedSibling
	// DroppedNoSpare: a spare copy found no free worker (ErrNoSpare).
	DroppedNoSpare = wire.DroppedNoSpare
)

// Role is a tied copy's part in the spare form of tied requests (see the
// package documentation, "Two forms"). The zero Role, RoleEither, is the
// symmetric form: the copy queues, and claims its tie before it starts.
type Role = wire.Role

const (
	// RoleEither is a copy of the symmetric form.
	RoleEither = wire.RoleEither
	// RolePrimary is the first copy of the spare form: it queues as an
	// untied request does and starts without claiming; while it is
	// queued, its spare's claim drops it.
	RolePrimary = wire.RolePrimary
	// RoleSpare is the second copy of the spare form: it runs only on a
	// worker free when it arrives (otherwise it is refused at once,
	// ErrNoSpare), and claims its tie, holding that worker, before it
	// starts, so that it runs only in place of a primary still queued.
	RoleSpare = wire.RoleSpare
)

// ParseRole parses the value of RoleHeader: "" is RoleEither, "primary"
// RolePrimary and "spare" RoleSpare. Anything else is an error wrapping
// ErrBadTie.
func ParseRole(s string) (Role, error) { return wire.ParseRole(s) }

// DefaultClaimPath is where Server.Handler serves claims from peers (see
// Claim), and where HTTPSender posts them, unless Config.ClaimPath names
// another path.
const DefaultClaimPath = "/.tied/claim"

// DefaultCancelPath is the earlier default claim path, where servers of
// earlier versions post claims. Server.Handler serves claims there too
// when its claim path is DefaultClaimPath or DefaultCancelPath, so that
// those servers' claims still reach it.
//
// Deprecated: use DefaultClaimPath.
const DefaultCancelPath = "/.tied/cancel"

// ID length bounds: NewID makes 22 characters (128 random bits); a peer's
// implementation may use up to 64.
const (
	minIDLen = 16
	maxIDLen = 64
	// maxMessageLen bounds a claim: "v2.", an ID, a ticket and a
	// timestamp of at most 20 digits each and a signature of 43
	// characters, with dots between.
	maxMessageLen = 3 + maxIDLen + 1 + 20 + 1 + 20 + 1 + 43
)

// Errors of parsing and verification. Match them with errors.Is.
var (
	// ErrBadTie is wrapped by ParseTie's errors: the tie headers are
	// malformed.
	ErrBadTie = wire.ErrBadTie
	// ErrBadMessage is wrapped by the errors of a claim that is
	// malformed, not signed with the shared secret, or stale.
	ErrBadMessage = errors.New("tied: claim refused")
)

// Tie is what a tied request carries: its tie identifier and where its
// sibling went. The zero Tie means "not tied".
type Tie struct {
	// ID is the tie identifier, shared by both copies.
	ID string
	// Sibling is the address of the sibling's server.
	Sibling string
	// Role is the copy's part in the spare form; RoleEither for the
	// symmetric form.
	Role Role
}

// Tied reports whether t names a tie.
func (t Tie) Tied() bool { return t.ID != "" }

// NewID returns a fresh tie identifier: 128 random bits, base64url without
// padding (22 characters). Identifiers must be unguessable: a claim
// names only the identifier, so whoever could predict one could
// have a peer's copy dropped in the name of a request it did not send.
func NewID() string { return wire.NewTieID() }

// ParseTie parses the values of IDHeader and SiblingHeader. Both empty is
// the zero Tie (an untied request) and no error; one without the other, an
// identifier that is not 16 to 64 characters of A-Z, a-z, 0-9, '-' and '_',
// or an address that is empty, longer than 256 bytes or holds spaces or
// control characters, is an error wrapping ErrBadTie. The address is
// returned in normal form (see NormalizeAddr).
//
// The copy's Role is parsed apart, by ParseRole: ParseTie leaves it
// RoleEither.
func ParseTie(id, sibling string) (Tie, error) {
	if id == "" && sibling == "" {
		return Tie{}, nil
	}
	if err := checkID(id); err != nil {
		return Tie{}, fmt.Errorf("%w: %s %q: %v", ErrBadTie, IDHeader, id, err)
	}
	a, err := NormalizeAddr(sibling)
	if err != nil {
		return Tie{}, fmt.Errorf("%w: %s: %v", ErrBadTie, SiblingHeader, err)
	}
	return Tie{ID: id, Sibling: a}, nil
}

// ParseTieRole parses the values of IDHeader, SiblingHeader and
// RoleHeader: ParseTie's Tie with ParseRole's Role. A role without a tie
// is an error wrapping ErrBadTie.
func ParseTieRole(id, sibling, role string) (Tie, error) {
	t, err := ParseTie(id, sibling)
	if err != nil {
		return Tie{}, err
	}
	r, err := ParseRole(role)
	if err != nil {
		return Tie{}, err
	}
	if r != RoleEither && !t.Tied() {
		return Tie{}, fmt.Errorf("%w: %s %q without %s", ErrBadTie, RoleHeader, role, IDHeader)
	}
	t.Role = r
	return t, nil
}

// checkID reports what is wrong with a tie identifier, or nil.
func checkID(id string) error {
	if len(id) < minIDLen || len(id) > maxIDLen {
		return fmt.Errorf("length %d, want %d to %d characters (tied.NewID makes one)", len(id), minIDLen, maxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !idChar(id[i]) {
			return fmt.Errorf("character %q at %d is not in A-Z a-z 0-9 - _", id[i], i)
		}
	}
	return nil
}

func idChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// NormalizeAddr returns a peer address in the form in which Config.Peers
// and SiblingHeader are compared: without trailing slashes, and with the
// scheme (before "://", if there is one) and the host (up to the first
// '/', '?' or '#' after it; user information before an '@' excepted) in
// lower case. The rest, such as a base URL's path, is kept as written:
// "HTTP://Node-2:8080/Svc/" becomes "http://node-2:8080/Svc". It refuses
// an empty address, one longer than 256 bytes, and one with spaces or
// control characters.
func NormalizeAddr(addr string) (string, error) { return wire.NormalizeAddr(addr) }

// Claim is an authenticated claim: the server holding a worker for its
// copy of tie ID asks the sibling's server for the right to start it,
// before starting it. The receiver answers VerdictGo (its own copy is
// dropped, now or on arrival) or VerdictLost (its own copy started, or
// won a simultaneous claim). Ticket breaks the tie between two claims
// that cross: the lower ticket wins, on both servers alike.
type Claim struct {
	ID     string
	Ticket uint64
	Sent   time.Time
}

// Sign returns the wire form of c signed with secret:
//
//	v2.<id>.<ticket>.<sent, Unix nanoseconds>.<signature>
//
// where the signature is HMAC-SHA256 keyed with secret over
// "tied-claim-v2\n<id>\n<ticket>\n<sent>", in base64url without padding.
func (c Claim) Sign(secret []byte) string {
	tk := strconv.FormatUint(c.Ticket, 10)
	ts := strconv.FormatInt(c.Sent.UnixNano(), 10)
	return "v2." + c.ID + "." + tk + "." + ts + "." + base64.RawURLEncoding.EncodeToString(mac(secret, c.ID, tk, ts))
}

func mac(secret []byte, id, ticket, ts string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("tied-claim-v2\n"))
	m.Write([]byte(id))
	m.Write([]byte{'\n'})
	m.Write([]byte(ticket))
	m.Write([]byte{'\n'})
	m.Write([]byte(ts))
	return m.Sum(nil)
}

// VerifyClaim parses and authenticates a claim made by Sign. It refuses,
// with an error wrapping ErrBadMessage, a malformed message, a signature
// that is not secret's (compared in constant time), and a message whose
// timestamp is more than maxSkew away from now, in either direction.
//
// Within maxSkew a claim can be replayed; that is harmless: it can only
// drop a copy of the tie it names, whose sibling had the right to start,
// and a replay finds that copy dropped already or started (VerdictLost).
func VerifyClaim(msg string, secret []byte, now time.Time, maxSkew time.Duration) (Claim, error) {
	if len(msg) > maxMessageLen {
		return Claim{}, fmt.Errorf("%w: %d bytes, longer than %d", ErrBadMessage, len(msg), maxMessageLen)
	}
	rest, ok := strings.CutPrefix(msg, "v2.")
	if !ok {
		return Claim{}, fmt.Errorf("%w: not a v2 claim", ErrBadMessage)
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 4 {
		return Claim{}, fmt.Errorf("%w: want v2.<id>.<ticket>.<time>.<signature>", ErrBadMessage)
	}
	id, tk, ts, sig := parts[0], parts[1], parts[2], parts[3]
	if err := checkID(id); err != nil {
		return Claim{}, fmt.Errorf("%w: tie id: %v", ErrBadMessage, err)
	}
	ticket, err := strconv.ParseUint(tk, 10, 64)
	if err != nil || tk != strconv.FormatUint(ticket, 10) {
		return Claim{}, fmt.Errorf("%w: ticket %q is not a decimal number", ErrBadMessage, tk)
	}
	nanos, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts != strconv.FormatInt(nanos, 10) {
		return Claim{}, fmt.Errorf("%w: time %q is not Unix nanoseconds", ErrBadMessage, ts)
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(secret, id, tk, ts)) {
		return Claim{}, fmt.Errorf("%w: bad signature (do the servers share Config.Secret?)", ErrBadMessage)
	}
	sent := time.Unix(0, nanos)
	if d := now.Sub(sent); d > maxSkew || d < -maxSkew {
		return Claim{}, fmt.Errorf("%w: stale: signed %v from now, more than %v (are the servers' clocks in step?)", ErrBadMessage, -d, maxSkew)
	}
	return Claim{ID: id, Ticket: ticket, Sent: sent}, nil
}
