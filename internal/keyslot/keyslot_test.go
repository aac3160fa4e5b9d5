package keyslot

import (
	"slices"
	"strings"
	"testing"
)

// The examples of the Redis Cluster specification, and hash tags.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		key  string
		slot int
	}{
		{"123456789", 0x31C3 % Slots}, // CRC16/XMODEM's check value
		{"foo", 12182},
		{"{user1000}.following", Of("user1000")},
		{"foo{{bar}}zap", Of("{bar")},
		{"foo{bar}{zap}", Of("bar")},
	} {
		if got := Of(tc.key); got != tc.slot {
			t.Errorf("Of(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}

func FuzzOf(f *testing.F) {
	f.Add("{user}.name")
	f.Fuzz(func(t *testing.T, key string) {
		s := Of(key)
		if s < 0 || s >= Slots {
			t.Fatalf("Of(%q) = %d", key, s)
		}
		if i := strings.IndexByte(key, '{'); i >= 0 {
			if j := strings.IndexByte(key[i+1:], '}'); j > 0 && Of(key[i+1:i+1+j]) != s {
				t.Fatalf("Of(%q) differs from its tag's", key)
			}
		}
	})
}

// Group keeps the slots in the order of their first key, and each slot's
// positions in keys' order.
func TestGroup(t *testing.T) {
	keys := []string{"{a}1", "{b}1", "{a}2", "{c}1", "{b}2", "{a}3"}
	order, bySlot := Group(keys)
	a, b, c := Of("a"), Of("b"), Of("c")
	if want := []int{a, b, c}; !slices.Equal(order, want) {
		t.Errorf("order = %v, want %v", order, want)
	}
	for s, want := range map[int][]int{a: {0, 2, 5}, b: {1, 4}, c: {3}} {
		if got := bySlot[s]; !slices.Equal(got, want) {
			t.Errorf("bySlot[%d] = %v, want %v", s, got, want)
		}
	}
	if len(bySlot) != 3 {
		t.Errorf("bySlot has %d slots, want 3", len(bySlot))
	}
	if order, bySlot := Group(nil); order != nil || len(bySlot) != 0 {
		t.Errorf("Group(nil) = %v, %v, want no slots", order, bySlot)
	}
}
