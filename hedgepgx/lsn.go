package hedgepgx

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// LSN is a PostgreSQL write-ahead log position (the pg_lsn type): a byte
// offset into the WAL, which only grows on a server. Its text form is two
// hexadecimal numbers, the high and low 32 bits: "16/B374D848".
type LSN uint64

// ErrBadLSN is matched (errors.Is) by the error of ParseLSN.
var ErrBadLSN = errors.New("hedgepgx: not a WAL position")

// ParseLSN parses the text form of a pg_lsn, "X/Y" with X and Y
// hexadecimal numbers of 1 to 8 digits, either case, as PostgreSQL prints
// and accepts it.
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok || !hex32(hi) || !hex32(lo) {
		return 0, fmt.Errorf("%w: %q: want two hexadecimal numbers of up to 8 digits, as in \"16/B374D848\"", ErrBadLSN, s)
	}
	h, _ := strconv.ParseUint(hi, 16, 32)
	l, _ := strconv.ParseUint(lo, 16, 32)
	return LSN(h<<32 | l), nil
}

// hex32 reports whether s is 1 to 8 hexadecimal digits (no sign, no
// prefix, no spaces).
func hex32(s string) bool {
	if len(s) == 0 || len(s) > 8 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// String returns the text form PostgreSQL prints: "16/B374D848".
func (l LSN) String() string {
	return fmt.Sprintf("%X/%X", uint64(l)>>32, uint64(l)&0xFFFFFFFF)
}

type minLSNKey struct{}

// WithMinLSN returns a context that makes every read done with it (or a
// context derived from it) read from a server that has replayed the WAL
// at least up to lsn: the primary, or a replica whose last polled
// position is at or past lsn and whose position, read again on the
// connection that serves the copy, still is (see "Lag and consistency"
// in the package doc). Take lsn with Client.PrimaryLSN or Client.ExecLSN
// after a write to read that write back (read-your-writes). If ctx
// already carries a position, the larger one holds, so that a caller may
// thread positions through without comparing them. The zero LSN asks for
// nothing.
func WithMinLSN(ctx context.Context, lsn LSN) context.Context {
	if old := MinLSN(ctx); old >= lsn {
		return ctx
	}
	return context.WithValue(ctx, minLSNKey{}, lsn)
}

// MinLSN returns the position WithMinLSN put in ctx, or 0.
func MinLSN(ctx context.Context) LSN {
	l, _ := ctx.Value(minLSNKey{}).(LSN)
	return l
}
