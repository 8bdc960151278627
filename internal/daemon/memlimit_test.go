package daemon

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestApplyLimit(t *testing.T) {
	defer debug.SetMemoryLimit(math.MaxInt64)
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"268435456\n", 201326592, true},  // the charts' 256Mi: 192Mi
		{"1073741824\n", 966367642, true}, // 1Gi: 90%
		{"67108864\n", 33554432, true},    // 64Mi: half
		{"max\n", 0, false},
		{"9223372036854771712\n", 0, false}, // cgroup v1's "no limit"
		{"", 0, false},
	} {
		got, ok := applyLimit(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("applyLimit(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
		if ok && debug.SetMemoryLimit(-1) != tc.want {
			t.Errorf("the runtime's limit is not %d", tc.want)
		}
	}
}
