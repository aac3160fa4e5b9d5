package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc: 100 on every
// Linux architecture Go supports (the kernel fixes it for the ABI).
const clockTicks = 100

// CPUSample is a reading of the machine's and our own CPU time counters.
// The difference of two samples (CPUBetween) says how much CPU other
// processes used meanwhile: the machine's busy time minus ours and our
// children's.
type CPUSample struct {
	At       time.Time
	Busy     uint64 // all CPUs, every state but idle and iowait, in ticks
	Self     uint64 // this process: user + system, in ticks
	Children uint64 // the given child processes: user + system, in ticks
	OK       bool   // false where /proc is missing (not Linux)
}

// ReadCPU reads /proc/stat, /proc/self/stat and /proc/<pid>/stat for each
// of pids. A pid that has gone is counted as zero. Without /proc it returns
// a sample with OK false.
func ReadCPU(pids []int) CPUSample {
	s := CPUSample{At: time.Now()}
	busy, err := machineBusy()
	if err != nil {
		return s
	}
	self, err := procCPU("/proc/self/stat")
	if err != nil {
		return s
	}
	s.Busy, s.Self, s.OK = busy, self, true
	for _, p := range pids {
		if c, err := procCPU("/proc/" + strconv.Itoa(p) + "/stat"); err == nil {
			s.Children += c
		}
	}
	return s
}

// CPUUse is the CPU used between two samples, in cores (1 = one CPU busy
// all the time).
type CPUUse struct {
	Others   float64 // other processes of the machine
	Self     float64 // this process
	Children float64 // our child processes (redis-server)
	OK       bool
}

// CPUBetween returns the CPU used from a to b.
func CPUBetween(a, b CPUSample) CPUUse {
	if !a.OK || !b.OK {
		return CPUUse{}
	}
	secs := b.At.Sub(a.At).Seconds()
	if secs <= 0 {
		return CPUUse{}
	}
	cores := func(d int64) float64 { return float64(d) / clockTicks / secs }
	self := int64(b.Self - a.Self)
	children := int64(b.Children) - int64(a.Children)
	others := int64(b.Busy-a.Busy) - self - max(children, 0)
	return CPUUse{Others: max(cores(others), 0), Self: cores(self), Children: max(cores(children), 0), OK: true}
}

func machineBusy() (uint64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return 0, errors.New("bench: /proc/stat: unexpected first line")
	}
	// user nice system idle iowait irq softirq steal [guest guest_nice];
	// guest time is already counted in user and nice.
	var busy uint64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc/stat: %w", err)
		}
		busy += n
	}
	return busy, nil
}

// procCPU returns utime + stime of a /proc/<pid>/stat file.
func procCPU(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: %s: no command name", path)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: %s: too few fields", path)
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("bench: %s: %w", path, err)
	}
	return u + s, nil
}

// LoadAverage returns the 1-minute load average, or -1 without /proc.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
