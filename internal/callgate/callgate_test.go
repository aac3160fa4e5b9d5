package callgate

import (
	"testing"
	"testing/synctest"
)

func TestGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Gate
		if g.Closed() || !g.Enter() {
			t.Fatal("a new Gate is closed")
		}
		if !g.Close() || g.Close() {
			t.Fatal("Close does not report the first call alone")
		}
		if !g.Closed() || g.Enter() {
			t.Fatal("a closed Gate lets a call in")
		}
		done := make(chan struct{})
		go func() {
			g.Wait()
			close(done)
		}()
		synctest.Wait() // the waiter is blocked in Wait, or has returned
		select {
		case <-done:
			t.Fatal("Wait returned while a call was in")
		default:
		}
		g.Leave()
		<-done
	})
}
