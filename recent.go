package hedge

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge/quantile"
)

// recentSpan is how far back a recent [Distribution] ([ReplicaStats.Recent])
// looks. It is kept as two halves, the current one and the one before,
// so that it holds the values of the last recentSpan/2 at least and of
// the last recentSpan at most: a burst of slowness leaves it within a
// minute.
const recentSpan = time.Minute

// recentHalf is the span of one half of a recent window.
const recentHalf = recentSpan / 2

// recentHist counts the values of the current half-window span and of the
// one before it, on the [Hedger]'s clock (times are arguments: it reads no
// clock). Its zero value is ready to use. Record is lock-free except on
// the first value of a span, which starts a fresh histogram (about
// 20 KB) under the mutex; reading takes the mutex.
type recentHist struct {
	mu   sync.Mutex                         // held to start a span and to read
	span atomic.Int64                       // index of cur's span: a time / recentHalf
	cur  atomic.Pointer[quantile.Histogram] // the values of span; nil before the first
	prev atomic.Pointer[quantile.Histogram] // those of span-1, or nil
}

// record counts v, recorded at now.
func (r *recentHist) record(now time.Duration, v int64) {
	s := int64(now / recentHalf)
	if h := r.cur.Load(); h != nil && s == r.span.Load() {
		h.Record(v)
		return
	}
	r.start(s).Record(v)
}

// start returns the histogram of span s, starting it if s is later than
// the current span; a time before the current span (a caller that read
// the clock before another started the span) counts in the current one.
func (r *recentHist) start(s int64) *quantile.Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, old := r.cur.Load(), r.span.Load()
	switch {
	case cur != nil && s <= old:
		return cur
	case cur != nil && s == old+1:
		r.prev.Store(cur)
	default:
		r.prev.Store(nil) // the span before s saw no value
	}
	h := new(quantile.Histogram)
	r.cur.Store(h)
	r.span.Store(s)
	return h
}

// distribution returns the values of the recent window at now: those of
// now's span and the one before.
func (r *recentHist) distribution(now time.Duration) Distribution {
	r.mu.Lock()
	cur, prev, span := r.cur.Load(), r.prev.Load(), r.span.Load()
	r.mu.Unlock()
	switch s := int64(now / recentHalf); {
	case cur == nil || s > span+1:
		return Distribution{}
	case s == span+1:
		return merged(cur, nil)
	}
	return merged(cur, prev)
}

// merged returns the [Distribution] of the values of a and b (b may be
// nil), as [distribution] gives that of one histogram.
func merged(a, b *quantile.Histogram) Distribution {
	s := a.Snapshot()
	if b != nil {
		sb := b.Snapshot()
		s.Add(&sb)
	}
	return distributionOf(&s)
}
