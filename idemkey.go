package hedge

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/tailcut/hedge/internal/decide"
)

// NewIdempotencyKey returns a new idempotency key: a UUIDv7 (RFC 9562) in
// its canonical text form, 48 bits of Unix milliseconds followed by 74
// random bits, so that keys are unique without coordination and sort by
// creation time (which keeps a database index on them compact).
//
// Make the key once per user intent, before the first attempt, and reuse
// it for every copy and retry of that intent: a hedge, a retry after a
// timeout, a resend after a crash of the client (store the key with the
// pending work). A key made per attempt defeats deduplication: the server
// sees distinct operations and runs each. Pass it with [WithIdempotencyKey],
// or as the Idempotency-Key header through hedgehttp with
// HedgeKeyedWrites; package dedup is the server half that makes the write
// commit once.
func NewIdempotencyKey() string {
	var u [16]byte
	_, _ = rand.Read(u[6:]) // crypto/rand.Read never fails
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(time.Now().UnixMilli()))
	copy(u[:6], ms[2:])
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // variant 10
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// marks is what [WithIdempotencyKey], [NotIdempotent] and [WithFanOut] attach
// to a context, under one key so that Do finds them all with one lookup.
type marks struct {
	key   string
	write bool
	fan   *fanOut // the fan-out the request is a leaf of, or nil
}

type marksKey struct{}

// with returns ctx with the marks it carries, changed by set.
func with(ctx context.Context, set func(*marks)) context.Context {
	v := new(marks)
	if in, _ := ctx.Value(marksKey{}).(*marks); in != nil {
		*v = *in
	}
	set(v)
	return context.WithValue(ctx, marksKey{}, v)
}

// WithIdempotencyKey attaches an idempotency key to the request: every copy
// sees it in [Attempt.Key] and should send it, so that the server applies the
// request once however many copies arrive. A request marked [NotIdempotent]
// is hedged only if it carries a key.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return with(ctx, func(m *marks) { m.key = key })
}

// NotIdempotent marks the request as unsafe to repeat (a write). Do sends it
// once, unhedged, unless it also carries an idempotency key, and counts it
// in [Stats.Unhedgeable].
func NotIdempotent(ctx context.Context) context.Context {
	return with(ctx, func(m *marks) { m.write = true })
}

// fanOut is one fan-out: its identity (a distinct pointer per fan-out)
// and, for [DoFan]'s, the decision state its leaves share.
type fanOut struct {
	dec  decide.Fan
	call bool // made by DoFan: its leaves' Plans share dec
}

// WithFanOut marks the requests that Do sends with the returned context
// (or one derived from it) as the leaves of one fan-out: requests sent
// together and awaited together, such as the reads of one page from many
// shards. Call it once per fan-out, before sending the leaves.
//
// The spare-capacity rule ([Config.MaxReplicaLoad]) reads a replica that
// holds this client's requests as busy with earlier work, and stops
// hedging when most primaries find their replica busy. A fan-out puts
// several leaves on each replica at once, so without the mark its own
// leaves would look like load, and a fan-out wider than the replicas
// would send no hedge at all; with it, a replica that holds only leaves
// of the same fan-out counts as idle for that rule. A hedge still goes
// only to a replica within MaxReplicaLoad, and the budget is the
// [Hedger]'s, as for any request.
func WithFanOut(ctx context.Context) context.Context {
	f := new(fanOut)
	return with(ctx, func(m *marks) { m.fan = f })
}
