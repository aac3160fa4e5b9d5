package bench

import (
	"syscall"
	"time"
)

const haveKernelSleep = true

// kernelSleep sleeps for d in nanosleep(2). The goroutine keeps its OS
// thread meanwhile; the runtime hands the thread's P to other goroutines
// if the sleep lasts.
func kernelSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	_ = syscall.Nanosleep(&ts, nil)
}
