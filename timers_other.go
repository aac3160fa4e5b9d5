//go:build !linux

package hedge

import "time"

// fineSleep sleeps for d. Elsewhere than Linux it uses the runtime timer,
// whose lateness the precise queue then measures as that of a fine sleep
// and spins for.
func fineSleep(d time.Duration) { time.Sleep(d) }
