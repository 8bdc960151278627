package webhook

import (
	"context"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
)

// What admission requests may cost the manager, whoever sends them: the
// webhook port answers anything that reaches it, not only the API server.
// controller-runtime reads at most 7 MiB of a body, but it reads every
// request at once, and decoding a body takes several times its size, so
// fifty large requests in parallel would take the manager past its memory
// limit. Requests therefore wait for a share of a budget of body bytes
// before their body is read (a small claim costs its floor, a large one
// its size), and a body must arrive within a deadline, so a slow sender
// cannot hold a share for ever.
const (
	// MaxRequestBytes is the largest body read, controller-runtime's limit.
	MaxRequestBytes = 7 << 20
	// inFlightBytes is the budget: two of the largest bodies, or hundreds
	// of ordinary ones, decoded at once.
	inFlightBytes = 2 * MaxRequestBytes
	// requestFloor is what the smallest request counts for, so a flood of
	// tiny requests is bounded too.
	requestFloor = 32 << 10
	// queueWait is how long a request waits for its share: the API server
	// gives up on the webhook after 5 s (timeoutSeconds) anyway.
	queueWait = 4 * time.Second
	// bodyDeadline bounds reading one body.
	bodyDeadline = 10 * time.Second
)

// limit is an http.Handler that admits a request to next only within the
// budget.
type limit struct {
	budget *semaphore.Weighted
	wait   time.Duration // for a share of the budget
	next   http.Handler
}

// newLimits returns a wrapper sharing one budget among every handler it wraps.
func newLimits() func(http.Handler) http.Handler {
	budget := semaphore.NewWeighted(inFlightBytes)
	return func(next http.Handler) http.Handler { return limit{budget: budget, wait: queueWait, next: next} }
}

func (l limit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > MaxRequestBytes {
		http.Error(w, "request entity is too large", http.StatusRequestEntityTooLarge)
		return
	}
	cost := r.ContentLength
	if cost < 0 { // unknown length: count the most it may read
		cost = MaxRequestBytes
	}
	cost = max(cost, requestFloor)
	ctx, cancel := context.WithTimeout(r.Context(), l.wait)
	defer cancel()
	if err := l.budget.Acquire(ctx, cost); err != nil {
		http.Error(w, "too many admission requests in flight", http.StatusTooManyRequests)
		return
	}
	defer l.budget.Release(cost)
	// Not every ResponseWriter supports deadlines (a test recorder); the
	// server's does.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyDeadline))
	l.next.ServeHTTP(w, r)
}
