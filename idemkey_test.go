package hedge_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/tailcut/hedge"
)

var uuidv7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewIdempotencyKey(t *testing.T) {
	seen := map[string]bool{}
	before := time.Now().UnixMilli()
	for range 10000 {
		k := hedge.NewIdempotencyKey()
		if !uuidv7.MatchString(k) {
			t.Fatalf("%q is not a canonical UUIDv7", k)
		}
		if seen[k] {
			t.Fatalf("key %q made twice", k)
		}
		seen[k] = true
	}
	after := time.Now().UnixMilli()
	k := hedge.NewIdempotencyKey()
	var ms int64
	fmt.Sscanf(k[0:8]+k[9:13], "%x", &ms)
	if ms < before || ms > after+1000 {
		t.Fatalf("timestamp %d of %q is outside [%d, %d]", ms, k, before, after)
	}
}

// The key is made once for the user's intent ("place this order"), and
// every copy and retry of it carries the same key.
func ExampleNewIdempotencyKey() {
	h, _ := hedge.New(hedge.Config{Replicas: 2})
	key := hedge.NewIdempotencyKey() // once, before the first attempt
	ctx := hedge.WithIdempotencyKey(hedge.NotIdempotent(context.Background()), key)
	keys := make(chan string, 2)
	_, err := hedge.Do(ctx, h, "PlaceOrder", func(ctx context.Context, a hedge.Attempt) (string, error) {
		keys <- a.Key // send it to the server, such as in an Idempotency-Key header
		return "order placed", nil
	})
	fmt.Println(err, <-keys == key)
	// Output: <nil> true
}
