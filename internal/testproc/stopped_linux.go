package testproc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Stopped reports whether the process pid is stopped by a signal, from
// the state field of /proc/<pid>/stat ("T"; "t" is a tracing stop).
// Outside Linux it returns errors.ErrUnsupported.
func Stopped(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, err
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses, so
	// the state follows the last ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false, fmt.Errorf("/proc/%d/stat has no state field: %q", pid, b)
	}
	state := b[i+2]
	return state == 'T' || state == 't', nil
}
