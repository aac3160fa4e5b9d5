package hedge

import (
	"syscall"
	"time"
)

// fineSleep sleeps for d in the kernel (nanosleep), which wakes within the
// thread's timer slack (50 µs by default) instead of the runtime timer's
// millisecond when the process is idle. It blocks the goroutine's thread,
// not a processor: the runtime lets another thread run goroutines while
// this one sleeps in a system call.
func fineSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // EINTR only shortens the sleep
}
