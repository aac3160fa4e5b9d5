package tied

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"testing/synctest"
	"time"
)

// A copy that never reached a server does not end the call: copy 1 is
// sent at once, without waiting out the gap, and its answer is the call's.
// Any other failure of copy 0 before the gap still ends the call.
func TestRunNotSentFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := NewClient(ClientConfig{Replicas: 2, Gap: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		refused := errors.New("connect: connection refused")
		start := time.Now()
		v, release, err := Run(context.Background(), c, func(ctx context.Context, cp Copy) (string, error) {
			if cp.Index == 0 {
				return "", NotSent(refused)
			}
			return "second", nil
		}, nil)
		release()
		if err != nil || v != "second" {
			t.Fatalf("Run = %q, %v; want the second copy's answer", v, err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the second copy left after %v, want at once", d)
		}
		if st := c.Stats(); st.NotSent != 1 || st.Seconds != 1 || st.SecondWins != 1 || st.Failures != 0 {
			t.Errorf("%+v, want 1 copy not sent, 1 second copy, which won", st)
		}

		// Both copies unsent: the call fails, and its error is both
		// ErrNotSent and the transport's.
		_, release, err = Run(context.Background(), c, func(ctx context.Context, cp Copy) (string, error) {
			return "", NotSent(refused)
		}, nil)
		release()
		if !errors.Is(err, ErrNotSent) || !errors.Is(err, refused) {
			t.Fatalf("both unsent: %v, want ErrNotSent and the dial error", err)
		}

		// Another failure before the gap sends no second copy.
		sent := 0
		_, release, err = Run(context.Background(), c, func(ctx context.Context, cp Copy) (string, error) {
			sent++
			return "", fs.ErrPermission
		}, nil)
		release()
		if !errors.Is(err, fs.ErrPermission) || sent != 1 {
			t.Fatalf("a failure before the gap: %v after %d copies, want it after 1", err, sent)
		}
		if NotSent(nil) != nil {
			t.Error("NotSent(nil) is not nil")
		}
	})
}
