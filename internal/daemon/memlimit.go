package daemon

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// What of the container's memory limit the Go runtime does not count: the
// binary's own pages (some 45 MiB of it resident under load, measured on
// the manager at a /16), stacks of new goroutines, the kernel's page
// cache — and how far a burst may carry the heap past its soft limit
// before the collector catches up. At a 48 MiB reserve the manager's
// resident set reached 258 MiB in a 256 MiB container right after binding
// a /16. The runtime aims to stay under the limit less the larger of these
// two, and never under half of it.
const (
	reservedShare = 0.1
	reservedBytes = 64 << 20
)

// Where cgroup v2, and else v1, publish the container's limit.
const (
	cgroupMemoryMax   = "/sys/fs/cgroup/memory.max"
	cgroupV1MemoryMax = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// cgroupV1Unlimited: cgroup v1 reports no limit as the largest page-aligned
// int64; anything this large is no limit.
const cgroupV1Unlimited = 1 << 62

// limitMemory sets the Go runtime's soft memory limit from the container's
// limit (GoMemoryLimit), unless GOMEMLIMIT says otherwise or there is no
// limit: the garbage collector then works harder as the heap nears the
// limit, instead of the kernel killing the process at it.
func limitMemory() (limit int64, ok bool) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	data, err := os.ReadFile(cgroupMemoryMax)
	if err != nil {
		if data, err = os.ReadFile(cgroupV1MemoryMax); err != nil {
			return 0, false
		}
	}
	return applyLimit(string(data))
}

// applyLimit sets the soft limit from memory.max's content ("max": none)
// or memory.limit_in_bytes's (a huge number: none).
func applyLimit(memoryMax string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(memoryMax), 10, 64)
	if err != nil || n <= 0 || n >= cgroupV1Unlimited {
		return 0, false
	}
	limit := GoMemoryLimit(n)
	debug.SetMemoryLimit(limit)
	return limit, true
}

// GoMemoryLimit is the Go runtime's soft memory limit in a container
// limited to containerLimit bytes.
func GoMemoryLimit(containerLimit int64) int64 {
	reserve := max(int64(float64(containerLimit)*reservedShare), reservedBytes)
	return containerLimit - min(reserve, containerLimit/2)
}
