//go:build !linux

package bench

import "time"

const haveKernelSleep = false

func kernelSleep(d time.Duration) { time.Sleep(d) }
