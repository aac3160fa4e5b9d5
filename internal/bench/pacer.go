package bench

import (
	"runtime"
	"time"
)

// DefaultSpinWindow is how long before an intended time the Pacer stops
// sleeping on the runtime timer: a little more than that timer's usual
// overshoot on Linux (about 1 ms: with every goroutine blocked the runtime
// sleeps in epoll_wait, whose timeout is in whole milliseconds).
const DefaultSpinWindow = 1500 * time.Microsecond

// KernelMargin is how long before an intended time a kernel sleep ends,
// leaving the rest to the spin: about the 90th percentile of a nanosleep's
// wake-up latency on a small virtual machine.
const KernelMargin = 200 * time.Microsecond

// Pacer waits until intended instants, measured on the monotonic clock from
// Start, with sub-millisecond accuracy. A plain time.Sleep cannot pace an
// open-loop load of thousands of requests per second: asked for 100 µs it
// sleeps about a millisecond here, so requests would leave in bursts a
// millisecond late.
//
// So the Pacer sleeps on the runtime timer until SpinWindow before the
// instant, then, on Linux, in the kernel (nanosleep, whose high-resolution
// timer wakes within tens of microseconds) until KernelMargin before it,
// and spins for the rest, yielding the processor (runtime.Gosched) on every
// turn so that the goroutines it dispatched keep running. The kernel sleep
// matters on a small machine: spinning through the whole window kept a
// core busy at every rate, CPU taken from the servers being measured. At
// rates above about 1/KernelMargin the gaps are mostly shorter than the
// margin and the Pacer mostly spins.
//
// The lag achieved is measured in every run (RunResult.LagP99Us), never
// assumed.
type Pacer struct {
	// Start is the origin of the intended instants.
	Start time.Time
	// SpinWindow is how long before an instant sleeping on the runtime
	// timer stops. Zero means DefaultSpinWindow.
	SpinWindow time.Duration
	// NoKernelSleep spins through the whole SpinWindow.
	NoKernelSleep bool
}

// Now returns the time since Start.
func (p *Pacer) Now() time.Duration { return time.Since(p.Start) }

// Wait returns at or after the instant at (since Start) and returns how late
// it returned: zero or more.
func (p *Pacer) Wait(at time.Duration) time.Duration {
	spin := p.SpinWindow
	if spin <= 0 {
		spin = DefaultSpinWindow
	}
	for {
		now := time.Since(p.Start)
		d := at - now
		switch {
		case d <= 0:
			return -d
		case d > spin:
			time.Sleep(d - spin)
		case haveKernelSleep && !p.NoKernelSleep && d > KernelMargin+20*time.Microsecond:
			kernelSleep(d - KernelMargin)
		default:
			runtime.Gosched()
		}
	}
}
