package controlplane

import "sync"

// Warnings collects the warnings the API server sends a client (set it as
// the rest.Config's WarningHandler): what admission returns to a caller.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// Take returns the warnings received since the last Take.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}
