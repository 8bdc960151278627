package proc

import (
	"slices"
	"strings"
	"sync"
)

// Tail keeps the last lines written to it, to explain a process's failure.
type Tail struct {
	mu      sync.Mutex
	max     int
	lines   []string
	partial string
}

// NewTail keeps the last n lines.
func NewTail(n int) *Tail { return &Tail{max: n} }

func (t *Tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	parts := strings.Split(t.partial+string(b), "\n")
	t.partial = parts[len(parts)-1]
	t.lines = append(t.lines, parts[:len(parts)-1]...)
	if over := len(t.lines) - t.max; over > 0 {
		t.lines = slices.Clone(t.lines[over:])
	}
	return len(b), nil
}

// Describe returns the kept lines as an error message suffix naming whose
// output they are, or "" when there are none.
func (t *Tail) Describe(whose string) string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := slices.Clone(t.lines)
	if t.partial != "" {
		lines = append(lines, t.partial)
	}
	if len(lines) == 0 {
		return ""
	}
	return "\nlast lines of " + whose + ":\n\t" + strings.Join(lines, "\n\t")
}
