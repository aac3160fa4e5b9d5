package wire

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// The headers of tied requests; package tied documents each.
const (
	TiedIDHeader      = "Tied-Id"
	TiedSiblingHeader = "Tied-Sibling"
	TiedDroppedHeader = "Tied-Dropped"
	TiedRefusedHeader = "Tied-Refused"
	TiedRoleHeader    = "Tied-Role"
)

// The gRPC metadata keys of TiedIDHeader, TiedSiblingHeader,
// TiedRoleHeader and TiedDroppedHeader (gRPC keys are lower case).
const (
	TiedIDKey      = "tied-id"
	TiedSiblingKey = "tied-sibling"
	TiedRoleKey    = "tied-role"
	TiedDroppedKey = "tied-dropped"
)

// The values of TiedDroppedHeader (and TiedDroppedKey): why a copy did
// not run.
const (
	// DroppedSibling: the sibling copy had the right to start.
	DroppedSibling = "sibling"
	// DroppedNoSpare: a spare copy found no free worker.
	DroppedNoSpare = "no-spare"
)

// RefusedQueueFull is the value of TiedRefusedHeader on a request
// refused because the server's queue was full.
const RefusedQueueFull = "queue-full"

// maxAddrLen bounds a sibling's address.
const maxAddrLen = 256

// The errors that a tied copy's answer stands for, on the server that
// gives it and the client that reads it alike. Package tied documents
// them as tied.ErrDropped, tied.ErrNoSpare, tied.ErrBadTie and
// tied.ErrInvalidConfig.
var (
	ErrTiedDropped       = errors.New("tied: dropped because the sibling copy started first")
	ErrTiedNoSpare       = fmt.Errorf("%w (no spare capacity: no worker was free for the spare copy)", ErrTiedDropped)
	ErrBadTie            = errors.New("tied: malformed tie headers")
	ErrTiedInvalidConfig = errors.New("tied: invalid configuration")
)

// Role is a tied copy's part in the spare form of tied requests; package
// tied documents it as tied.Role.
type Role int

// The roles; package tied documents them.
const (
	RoleEither Role = iota
	RolePrimary
	RoleSpare
)

// String returns the role's wire name: "", "primary" or "spare".
func (r Role) String() string {
	switch r {
	case RolePrimary:
		return "primary"
	case RoleSpare:
		return "spare"
	}
	return ""
}

// ParseRole parses the value of TiedRoleHeader: "" is RoleEither,
// "primary" RolePrimary and "spare" RoleSpare. Anything else is an error
// wrapping ErrBadTie.
func ParseRole(s string) (Role, error) {
	switch s {
	case "":
		return RoleEither, nil
	case "primary":
		return RolePrimary, nil
	case "spare":
		return RoleSpare, nil
	}
	if len(s) > 16 {
		s = s[:16]
	}
	return RoleEither, fmt.Errorf("%w: %s %q: want primary or spare", ErrBadTie, TiedRoleHeader, s)
}

// NormalizeAddr returns a peer address in the form in which addresses
// are compared; tied.NormalizeAddr documents it.
func NormalizeAddr(addr string) (string, error) {
	a := strings.TrimRight(addr, "/")
	scheme, rest, ok := strings.Cut(a, "://")
	if !ok {
		scheme, rest = "", a
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	user := strings.LastIndexByte(rest[:end], '@') + 1
	a = rest[:user] + strings.ToLower(rest[user:end]) + rest[end:]
	if ok {
		a = strings.ToLower(scheme) + "://" + a
	}
	if a == "" {
		return "", errors.New("empty address: name the sibling's server, as in Config.Peers")
	}
	if len(a) > maxAddrLen {
		return "", fmt.Errorf("address of %d bytes, longer than %d", len(a), maxAddrLen)
	}
	for i := 0; i < len(a); i++ {
		if a[i] <= ' ' || a[i] == 0x7f {
			return "", fmt.Errorf("address %q holds a space or control character", addr)
		}
	}
	return a, nil
}

// IsDropped reports whether resp is the answer to a tied copy dropped by
// its sibling, or a spare copy refused for want of a free worker: 409
// with TiedDroppedHeader.
func IsDropped(resp *http.Response) bool {
	return resp != nil && resp.StatusCode == http.StatusConflict && resp.Header.Get(TiedDroppedHeader) != ""
}

// DroppedError returns the error that the answer resp stands for when it
// is a dropped copy's (see IsDropped): ErrTiedNoSpare for a spare copy
// that found no free worker, ErrTiedDropped otherwise; nil when resp is
// no such answer.
func DroppedError(resp *http.Response) error {
	if !IsDropped(resp) {
		return nil
	}
	return DroppedErr(resp.Header.Get(TiedDroppedHeader))
}

// DroppedErr maps a TiedDroppedHeader (or TiedDroppedKey) value to its
// error: ErrTiedNoSpare for DroppedNoSpare, ErrTiedDropped otherwise.
func DroppedErr(v string) error {
	if v == DroppedNoSpare {
		return ErrTiedNoSpare
	}
	return ErrTiedDropped
}

// NewTieID returns a fresh tie identifier: 128 random bits, base64url
// without padding (22 characters); tied.NewID documents it.
func NewTieID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
