package etcdtest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// processStopped reports whether the kernel has stopped pid (state T).
func processStopped(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, err
	}
	// "pid (comm) state ...": the state follows the last ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false, fmt.Errorf("/proc/%d/stat has no state field: %q", pid, b)
	}
	return b[i+2] == 'T' || b[i+2] == 't', nil
}
