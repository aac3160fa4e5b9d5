package dedup

import (
	"container/heap"
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Defaults of MemoryOptions.
const (
	DefaultMaxEntries = 100_000
	DefaultMaxBytes   = 64 << 20
)

// MemoryOptions configures a MemoryStore. The zero value uses the
// defaults.
type MemoryOptions struct {
	// MaxEntries bounds the records kept. Zero means DefaultMaxEntries.
	MaxEntries int
	// MaxBytes bounds the bytes of keys, headers and bodies kept. Zero
	// means DefaultMaxBytes.
	MaxBytes int64
}

// MemoryStore is the in-process Store, the default of the middleware: it
// deduplicates the copies that reach one process, and forgets everything
// when the process ends. Services with more than one replica need a
// shared store (packages dedupsqlite, deduppg, dedupredis).
//
// It is bounded: when a new record would exceed MaxEntries or MaxBytes,
// expired records go first (the one that expired first), then completed
// ones, oldest first; finding each takes O(log n) of the records, so a
// full store costs a claim about what an empty one does. Evicting a
// completed record early means a copy arriving afterwards runs again, so
// size the bounds for the TTL and the write rate. Pending claims are never
// evicted: when only they are left, Claim fails with ErrFull (and the
// middleware answers 503). Expiry is lazy: a record past its lease or TTL
// counts as absent, and is dropped when met or when room is needed.
//
// It reads time with time.Now, so that it runs on the fake clock of a
// testing/synctest bubble. It is safe for concurrent use.
type MemoryStore struct {
	maxEntries int
	maxBytes   int64

	mu    sync.Mutex
	m     map[string]*memEntry
	byExp expiryHeap // every record, the one that expires first on top
	done  *list.List // of *memEntry, the completed records, oldest completion first
	bytes int64
}

type memEntry struct {
	rec     Record
	expires time.Time
	size    int64
	idx     int           // index in byExp
	elem    *list.Element // in done, when rec.Done
}

// expiryHeap is a min-heap of records by expiry (container/heap), so that
// the store finds an expired record to evict in O(log n), where a scan of
// every record took O(n) under the lock.
type expiryHeap []*memEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*memEntry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(o MemoryOptions) *MemoryStore {
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return &MemoryStore{maxEntries: o.MaxEntries, maxBytes: o.MaxBytes, m: map[string]*memEntry{}, done: list.New()}
}

// NewToken returns a random claim token: 128 bits in hexadecimal. Stores
// use it for Claim.Token.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// live returns key's entry if it has not expired, dropping it if it has.
func (s *MemoryStore) live(key string, now time.Time) *memEntry {
	e := s.m[key]
	if e == nil {
		return nil
	}
	if !now.Before(e.expires) {
		s.remove(e)
		return nil
	}
	return e
}

// add puts e in the store.
func (s *MemoryStore) add(e *memEntry) {
	s.m[e.rec.Key] = e
	heap.Push(&s.byExp, e)
	if e.rec.Done {
		e.elem = s.done.PushBack(e)
	}
	s.bytes += e.size
}

func (s *MemoryStore) remove(e *memEntry) {
	delete(s.m, e.rec.Key)
	heap.Remove(&s.byExp, e.idx)
	if e.elem != nil {
		s.done.Remove(e.elem)
		e.elem = nil
	}
	s.bytes -= e.size
}

// makeRoom evicts records until one of size more fits: the record that
// expired first, while one has; then the oldest completed one. Each
// eviction is O(log n).
func (s *MemoryStore) makeRoom(size int64, now time.Time) error {
	if size > s.maxBytes {
		return fmt.Errorf("%w: a record of %d bytes exceeds MaxBytes (%d)", ErrFull, size, s.maxBytes)
	}
	for len(s.m)+1 > s.maxEntries || s.bytes+size > s.maxBytes {
		var victim *memEntry
		if len(s.byExp) > 0 && !now.Before(s.byExp[0].expires) {
			victim = s.byExp[0]
		} else if el := s.done.Front(); el != nil {
			victim = el.Value.(*memEntry)
		}
		if victim == nil {
			return fmt.Errorf("%w (%d records, %d bytes)", ErrFull, len(s.m), s.bytes)
		}
		s.remove(victim)
	}
	return nil
}

func recordSize(key string, out Outcome) int64 {
	n := int64(len(key)) + int64(len(out.Body)) + 128
	for k, vs := range out.Header {
		n += int64(len(k))
		for _, v := range vs {
			n += int64(len(v)) + 16
		}
	}
	return n
}

// Claim implements Store.
func (s *MemoryStore) Claim(ctx context.Context, key string, fp Fingerprint, lease time.Duration) (Claim, error) {
	if err := ctx.Err(); err != nil {
		return Claim{}, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.live(key, now); e != nil {
		return Claim{Key: key, Fingerprint: fp, Existing: copyRecord(e.rec)}, nil
	}
	size := recordSize(key, Outcome{})
	if err := s.makeRoom(size, now); err != nil {
		return Claim{}, err
	}
	tok := NewToken()
	s.add(&memEntry{rec: Record{Key: key, Fingerprint: fp, Token: tok}, expires: now.Add(lease), size: size})
	return Claim{Key: key, Fingerprint: fp, Won: true, Token: tok}, nil
}

// Complete implements Store.
func (s *MemoryStore) Complete(ctx context.Context, c Claim, out Outcome, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	// A pending claim whose lease ended but that no other copy took over
	// (same token) still completes.
	e := s.m[c.Key]
	if e == nil || e.rec.Token != c.Token || c.Token == "" {
		return fmt.Errorf("%w (key %q)", ErrLostClaim, c.Key)
	}
	if e.rec.Done {
		if !now.Before(e.expires) {
			s.remove(e)
			return fmt.Errorf("%w (key %q)", ErrLostClaim, c.Key)
		}
		return nil
	}
	size := recordSize(c.Key, out)
	s.remove(e)
	if err := s.makeRoom(size, now); err != nil {
		// Put the claim back: it still holds until its lease ends.
		s.add(e)
		return err
	}
	e.rec.Done = true
	e.rec.Outcome = copyOutcome(out)
	e.expires = now.Add(ttl)
	e.size = size
	s.add(e)
	return nil
}

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, key string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(key, time.Now())
	if e == nil {
		return Record{}, fmt.Errorf("%w (key %q)", ErrNotFound, key)
	}
	return copyRecord(e.rec), nil
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, c Claim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.live(c.Key, time.Now()); e != nil && !e.rec.Done && e.rec.Token == c.Token {
		s.remove(e)
	}
	return nil
}

// Renew implements Store. A pending claim whose lease ended but that no
// other copy took over (same token) is renewed too.
func (s *MemoryStore) Renew(ctx context.Context, c Claim, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[c.Key]
	if e == nil || e.rec.Done || e.rec.Token != c.Token || c.Token == "" {
		return fmt.Errorf("%w (key %q)", ErrLostClaim, c.Key)
	}
	e.expires = time.Now().Add(lease)
	heap.Fix(&s.byExp, e.idx)
	return nil
}

// Len returns how many records the store holds, expired ones not yet
// dropped included, and their size in bytes as counted for MaxBytes.
func (s *MemoryStore) Len() (records int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m), s.bytes
}

func copyRecord(r Record) Record {
	r.Outcome = copyOutcome(r.Outcome)
	return r
}

func copyOutcome(o Outcome) Outcome {
	if o.Header != nil {
		h := make(http.Header, len(o.Header))
		for k, vs := range o.Header {
			h[k] = slices.Clone(vs)
		}
		o.Header = h
	}
	o.Body = slices.Clone(o.Body)
	return o
}
