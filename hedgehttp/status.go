package hedgehttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/tailcut/hedge"
)

// maxFailureBody is how much of a failed response's body (a retryable 5xx,
// or pushback) is kept in memory so that it can still be returned to the
// caller after its copy's context ended. A larger body makes the response
// final instead (see the package doc).
const maxFailureBody = 64 << 10

// discard frees a response that lost the race (DoHeld's discard).
func discard(resp *http.Response) {
	if resp != nil {
		resp.Body.Close()
	}
}

// failedResponse is a response that counts as a failed copy: a retryable
// status, or pushback (then wrapped in hedge.Pushback). Its body was read
// into memory, so that it can be returned after its copy's context ended.
type failedResponse struct {
	resp *http.Response
}

func (f *failedResponse) Error() string {
	return fmt.Sprintf("hedgehttp: copy answered %s", f.resp.Status)
}

// classify decides whether resp is a win (returned as is) or a failure
// (nil and an error holding resp, body buffered).
func (t *Transport) classify(resp *http.Response) (*http.Response, error) {
	code := resp.StatusCode
	pushback := code == http.StatusTooManyRequests || (code >= 500 && resp.Header.Get("Retry-After") != "")
	retryable := !pushback && (code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout)
	if !pushback && !retryable {
		return resp, nil
	}
	if pushback {
		t.pushbacks.Add(1) // a final response below ends hedging too
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxFailureBody+1))
	if err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("hedgehttp: reading the body of a %s response: %w", resp.Status, err)
	}
	if len(buf) > maxFailureBody {
		// Too large to hold: this response is final, streamed as is.
		resp.Body = &multiReadCloser{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), c: resp.Body}
		return resp, nil
	}
	resp.Body.Close()
	resp.Body = bufferBody(buf)
	fr := &failedResponse{resp}
	if pushback {
		return nil, hedge.Pushback(fr)
	}
	t.retryStatus.Add(1)
	return nil, fr
}

// lastFailedResponse returns the response of the copy that failed last,
// among those that failed with a response, or nil.
func lastFailedResponse(err error) *http.Response {
	var ae *hedge.AttemptsError
	if errors.As(err, &ae) {
		for i := len(ae.Errs) - 1; i >= 0; i-- {
			if r := lastFailedResponse(ae.Errs[i]); r != nil {
				return r
			}
		}
		return nil
	}
	var fr *failedResponse
	if errors.As(err, &fr) {
		return fr.resp
	}
	return nil
}
