package dedup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// Store keeps one record per idempotency key: first a claim (pending, with
// a lease), then the outcome of the operation that ran under the claim.
// Implementations must be safe for concurrent use, by goroutines and, for
// stores shared between processes, by processes.
//
// The contract every implementation meets (package storetest checks it
// against the real server):
//
//   - Claim inserts a pending record if the key has none, in one atomic
//     step of the store (an insert that fails if the key exists: never a
//     read followed by a write). A pending record whose lease has ended,
//     or a completed record whose TTL has ended, counts as absent: Claim
//     replaces it, again atomically (a compare-and-swap on the old
//     record). Of any number of concurrent Claims of one key, exactly one
//     wins.
//   - Complete stores the outcome only while the claim still holds (the
//     same token, still pending): it is fenced, so a holder that outlived
//     its lease cannot overwrite the outcome of the copy that took over.
//     Completing twice with the same claim is not an error.
//   - Get returns a live record, or ErrNotFound.
//   - Release deletes the pending record of the claim, so that a later
//     copy may run at once; it does nothing if the claim no longer holds.
//   - Renew extends the lease of a pending claim to lease from now, while
//     the claim still holds (the same token, still pending), fenced as
//     Complete is; it never touches a completed record.
//
// Errors of the store itself (down, timed out) are returned as they are;
// the Coordinator wraps them in ErrStoreUnavailable.
type Store interface {
	// Claim claims key for a request with fingerprint fp for lease. The
	// returned Claim has Won set if this call made the claim; otherwise
	// Existing is the live record that prevented it.
	Claim(ctx context.Context, key string, fp Fingerprint, lease time.Duration) (Claim, error)
	// Complete stores out as the outcome of c's key, kept for ttl. It
	// returns an error matching ErrLostClaim if c no longer holds the
	// key.
	Complete(ctx context.Context, c Claim, out Outcome, ttl time.Duration) error
	// Get returns the live record of key, or an error matching
	// ErrNotFound.
	Get(ctx context.Context, key string) (Record, error)
	// Release deletes c's pending record if c still holds it.
	Release(ctx context.Context, c Claim) error
	// Renew makes c's pending claim hold for lease from now. It returns
	// an error matching ErrLostClaim if c no longer holds the key, or
	// holds it completed.
	Renew(ctx context.Context, c Claim, lease time.Duration) error
}

// Claim is the result of Store.Claim.
type Claim struct {
	// Key is the claimed key.
	Key string
	// Fingerprint is the fingerprint of the request that claimed.
	Fingerprint Fingerprint
	// Won reports whether this call holds the claim.
	Won bool
	// Token identifies the holder when Won: a random value, so that a
	// holder whose lease ended cannot complete or release the claim of
	// the copy that took over.
	Token string
	// Existing is the live record that prevented the claim, when not Won.
	Existing Record
}

// Record is what a Store keeps for a key.
type Record struct {
	// Key is the key.
	Key string
	// Fingerprint is the fingerprint of the request that claimed the key.
	Fingerprint Fingerprint
	// Token is the token of the claim that made (pending) or completed
	// (done) the record.
	Token string
	// Done reports whether the outcome is stored; until then the record
	// is a pending claim.
	Done bool
	// Outcome is the stored outcome, when Done.
	Outcome Outcome
}

// Fingerprint identifies a request, so that a key reused for a different
// request is refused rather than answered with another request's outcome.
// It is the SHA-256 of what FingerprintOf was given.
type Fingerprint [32]byte

// FingerprintOf returns the SHA-256 of the parts, each preceded by its
// length, so that ("ab", "c") and ("a", "bc") differ.
func FingerprintOf(parts ...[]byte) Fingerprint {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		l := uint64(len(p))
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(p)
	}
	var fp Fingerprint
	h.Sum(fp[:0])
	return fp
}

// String returns the fingerprint in hexadecimal.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// Errors. Each is matched with errors.Is; the errors returned wrap them
// with details.
var (
	// ErrNotFound: the key has no live record.
	ErrNotFound = errors.New("dedup: no record for the idempotency key")
	// ErrLostClaim: the claim no longer holds the key (its lease ended
	// and another copy claimed it, or it was released or completed by
	// another holder).
	ErrLostClaim = errors.New("dedup: the claim on the idempotency key was lost (its lease ended)")
	// ErrFingerprintMismatch: the key was first used with a different
	// request. The client reused a key for another operation: it must
	// make a new key for each distinct operation.
	ErrFingerprintMismatch = errors.New("dedup: the idempotency key was already used for a different request")
	// ErrInProgress: another copy holds the claim and its outcome did not
	// arrive before the waiting request's context ended.
	ErrInProgress = errors.New("dedup: a request with this idempotency key is still in progress")
	// ErrStoreUnavailable wraps every error of the Store: the
	// middleware fails closed on it, never running an operation it
	// could not claim.
	ErrStoreUnavailable = errors.New("dedup: the idempotency store is unavailable")
	// ErrInvalidKey: the idempotency key is empty, too long, or has
	// characters outside printable ASCII.
	ErrInvalidKey = errors.New("dedup: invalid idempotency key")
	// ErrOutcomeTooLarge: the original response was larger than the
	// bound on stored bodies, so only a marker was stored and the
	// response cannot be replayed.
	ErrOutcomeTooLarge = errors.New("dedup: the original response was too large to store and cannot be replayed")
	// ErrFull: the store holds as many records as it may, and none can
	// be evicted (all are pending claims).
	ErrFull = errors.New("dedup: the store is full of pending claims")
)
