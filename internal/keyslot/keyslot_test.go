package keyslot

import (
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
