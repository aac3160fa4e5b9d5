package dedup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// Outcome is the stored result of an operation, replayed to every later
// copy of the request. For HTTP it is the response: status code, the
// headers that matter, body. For gRPC (package dedupgrpc) Status is the
// gRPC code, Body the marshalled reply or the error message.
type Outcome struct {
	// Status is the HTTP status code, or the gRPC code.
	Status int
	// Header holds the stored response headers (canonical names).
	Header http.Header
	// Body is the response body; empty when TooLarge.
	Body []byte
	// TooLarge marks an outcome whose body exceeded the bound on stored
	// bodies: it is not replayed, and later copies are told so
	// (ErrOutcomeTooLarge; HTTP 409).
	TooLarge bool
}

// outcomeVersion is the first byte of an encoded Outcome.
const outcomeVersion = 1

// maxEncodedHeaders bounds the header entries a decoder accepts, so that a
// corrupt record cannot make it allocate without bound.
const maxEncodedHeaders = 1 << 12

// errCorrupt is wrapped by UnmarshalBinary's errors.
var errCorrupt = errors.New("dedup: corrupt stored outcome")

// MarshalBinary encodes the outcome for a store: a version byte, flags,
// the status, the header entries in sorted order, and the body, with
// lengths as varints. It never fails.
func (o Outcome) MarshalBinary() ([]byte, error) {
	n := 16 + len(o.Body)
	for k, vs := range o.Header {
		n += 4 + len(k)
		for _, v := range vs {
			n += 4 + len(v)
		}
	}
	b := make([]byte, 0, n)
	b = append(b, outcomeVersion)
	var flags byte
	if o.TooLarge {
		flags |= 1
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, int64(o.Status))
	keys := make([]string, 0, len(o.Header))
	for k := range o.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		vs := o.Header[k]
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendString(b, v)
		}
	}
	b = appendString(b, string(o.Body))
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// UnmarshalBinary decodes what MarshalBinary encoded. A corrupt input is
// an error, never a panic.
func (o *Outcome) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	if v := d.byte(); v != outcomeVersion {
		return fmt.Errorf("%w: version %d, want %d", errCorrupt, v, outcomeVersion)
	}
	flags := d.byte()
	status := d.varint()
	nk := d.uvarint()
	if nk > maxEncodedHeaders {
		return fmt.Errorf("%w: %d header names", errCorrupt, nk)
	}
	var h http.Header
	if nk > 0 {
		h = make(http.Header, nk)
	}
	total := uint64(0)
	for range nk {
		k := d.string()
		nv := d.uvarint()
		total += nv
		if total > maxEncodedHeaders {
			return fmt.Errorf("%w: too many header values", errCorrupt)
		}
		vs := make([]string, 0, min(nv, 16))
		for range nv {
			vs = append(vs, d.string())
		}
		if d.err != nil {
			break
		}
		h[k] = vs
	}
	body := d.string()
	if d.err != nil {
		return fmt.Errorf("%w: %w", errCorrupt, d.err)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errCorrupt, len(d.b))
	}
	*o = Outcome{Status: int(status), Header: h, TooLarge: flags&1 != 0}
	if body != "" {
		o.Body = []byte(body)
	}
	return nil
}

// decoder reads varint-framed fields; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errShort
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errShort
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
