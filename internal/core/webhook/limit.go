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
//
// Small bodies — every object of this API the API server sends — have a
// budget of their own: a share is handed out in order of asking, so a few
// large requests that never send their body would otherwise hold every
// small one behind them, and every claim write with them.
const (
	// MaxRequestBytes is the largest body read, controller-runtime's limit.
	MaxRequestBytes = 7 << 20
	// smallBody is the largest body that counts against the small budget.
	smallBody = 1 << 20
	// largeBytes is the large budget: two of the largest bodies decoded
	// at once.
	largeBytes = 2 * MaxRequestBytes
	// smallBytes is the small budget: some two hundred ordinary requests
	// at once, far more than the API server sends one replica.
	smallBytes = 6 << 20
	// requestFloor is what the smallest request counts for, so a flood of
	// tiny requests is bounded too.
	requestFloor = 32 << 10
	// queueWait is how long a request waits for its share: the API server
	// gives up on the webhook after 5 s (timeoutSeconds) anyway.
	queueWait = 4 * time.Second
	// bodyDeadline bounds reading one body: the API server sends its body
	// at once, and has given up on the call after 5 s.
	bodyDeadline = 3 * time.Second
)

// limit is an http.Handler that admits a request to next only within its
// budget.
type limit struct {
	small, large *semaphore.Weighted
	wait         time.Duration // for a share of a budget
	next         http.Handler
}

// newLimits returns a wrapper sharing one pair of budgets among every
// handler it wraps.
func newLimits() func(http.Handler) http.Handler {
	small, large := semaphore.NewWeighted(smallBytes), semaphore.NewWeighted(largeBytes)
	return func(next http.Handler) http.Handler {
		return limit{small: small, large: large, wait: queueWait, next: next}
	}
}

func (l limit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > MaxRequestBytes {
		http.Error(w, "request entity is too large", http.StatusRequestEntityTooLarge)
		return
	}
	cost, budget := r.ContentLength, l.large
	switch {
	case cost < 0: // unknown length: count the most it may read
		cost = MaxRequestBytes
	case cost <= smallBody:
		budget = l.small
	}
	cost = max(cost, requestFloor)
	ctx, cancel := context.WithTimeout(r.Context(), l.wait)
	defer cancel()
	if err := budget.Acquire(ctx, cost); err != nil {
		http.Error(w, "too many admission requests in flight", http.StatusTooManyRequests)
		return
	}
	defer budget.Release(cost)
	// Not every ResponseWriter supports deadlines (a test recorder); the
	// server's does.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyDeadline))
	l.next.ServeHTTP(w, r)
}
