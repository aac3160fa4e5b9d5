package hedgehttp

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// buffer reads req's body for replay. It returns the whole body if it fits
// in MaxBodyBuffer; otherwise rest, a body that yields what was read
// followed by the unread remainder, for a single copy. req.Body is closed
// when buf is returned, and by whoever closes rest otherwise.
func (t *Transport) buffer(req *http.Request) (buf []byte, rest io.ReadCloser, err error) {
	if t.maxBody < 0 || req.ContentLength > t.maxBody {
		return nil, req.Body, nil
	}
	size := req.ContentLength
	if size <= 0 {
		size = 512
	}
	b := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead)) // room for the final EOF read
	n, err := b.ReadFrom(io.LimitReader(req.Body, t.maxBody+1))
	if err != nil {
		closeBody(req.Body)
		return nil, nil, fmt.Errorf("hedgehttp: reading the request body to buffer it for replay: %w", err)
	}
	if n > t.maxBody {
		return nil, &multiReadCloser{Reader: io.MultiReader(bytes.NewReader(b.Bytes()), req.Body), c: req.Body}, nil
	}
	closeBody(req.Body)
	return b.Bytes(), nil, nil
}

type multiReadCloser struct {
	io.Reader
	c io.Closer
}

func (m *multiReadCloser) Close() error { return m.c.Close() }

func bufferBody(buf []byte) io.ReadCloser {
	if len(buf) == 0 {
		return http.NoBody
	}
	return io.NopCloser(bytes.NewReader(buf))
}

func closeBody(b io.ReadCloser) {
	if b != nil {
		b.Close()
	}
}

// heldBody is the winner's body. Its copy's context lives until the body
// is closed or has returned EOF or an error: then release cancels it.
type heldBody struct {
	rc       io.ReadCloser
	release  func()
	released atomic.Bool
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		b.done()
	}
	return n, err
}

// Close closes the body, then releases the winner's context.
func (b *heldBody) Close() error {
	err := b.rc.Close()
	b.done()
	return err
}

func (b *heldBody) done() {
	if b.released.CompareAndSwap(false, true) {
		b.release()
	}
}
