package dedup_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/tailcut/hedge/dedup"
)

// BenchmarkMemoryStoreClaimFull measures a keyed write's cost in a
// MemoryStore that is full of completed records, as it is in a service
// that makes more keyed writes within the TTL than MaxEntries: each Claim
// must evict a record. Its cost must not grow with the number of records.
func BenchmarkMemoryStoreClaimFull(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			ctx := b.Context()
			s := dedup.NewMemoryStore(dedup.MemoryOptions{MaxEntries: n, MaxBytes: 1 << 40})
			fp := dedup.FingerprintOf([]byte("POST /orders"))
			out := dedup.Outcome{Status: 201, Body: []byte("created")}
			write := func(key string) {
				c, err := s.Claim(ctx, key, fp, time.Minute)
				if err != nil || !c.Won {
					b.Fatal(c, err)
				}
				if err := s.Complete(ctx, c, out, 24*time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			for i := range n {
				write("fill-" + strconv.Itoa(i))
			}
			i := 0
			for b.Loop() {
				write("k-" + strconv.Itoa(i))
				i++
			}
			if got, _ := s.Len(); got != n {
				b.Fatalf("%d records, want %d", got, n)
			}
		})
	}
}
