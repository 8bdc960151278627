package daemon

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryShare is the part of the container's memory limit the Go runtime
// aims to stay under: the rest is room for what the runtime does not count
// (stacks of new goroutines, the binary, the kernel's page cache).
const memoryShare = 0.9

// cgroupMemoryMax is where cgroup v2 publishes the container's limit.
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// limitMemory sets the Go runtime's soft memory limit to memoryShare of
// the container's limit, unless GOMEMLIMIT says otherwise or there is no
// limit: the garbage collector then works harder as the heap nears the
// limit, instead of the kernel killing the process at it.
func limitMemory() (limit int64, ok bool) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	data, err := os.ReadFile(cgroupMemoryMax)
	if err != nil {
		return 0, false
	}
	return applyLimit(string(data))
}

// applyLimit sets the soft limit from memory.max's content ("max": none).
func applyLimit(memoryMax string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(memoryMax), 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	limit := int64(float64(n) * memoryShare)
	debug.SetMemoryLimit(limit)
	return limit, true
}
