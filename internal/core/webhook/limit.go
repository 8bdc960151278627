package webhook

import (
	"context"
	"net"
	"net/http"
	"sync"
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
// its size), the body must arrive within a deadline and the answer be
// taken within the API server's timeout, so a slow sender or reader cannot
// hold a share for ever.
//
// Small bodies — every object of this API the API server sends — have a
// budget of their own, and one sender (one remote address) may hold at
// most half of it: shares are handed out in order of asking, so senders
// that declare bodies and never send them would otherwise hold every
// ordinary request behind them, and every claim write with them.
const (
	// MaxRequestBytes is the largest body read, controller-runtime's limit.
	MaxRequestBytes = 7 << 20
	// smallBody is the largest body that counts against the small budget.
	smallBody = 1 << 20
	// largeBytes is the large budget: one of the largest bodies, or a few
	// reviews of objects near etcd's limit, decoded at once.
	largeBytes = 8 << 20
	// smallBytes is the small budget: some two hundred ordinary requests
	// at once, far more than the API server sends one replica.
	smallBytes = 6 << 20
	// sourceBytes is what one remote address may hold of the small budget.
	sourceBytes = smallBytes / 2
	// requestFloor is what the smallest request counts for, so a flood of
	// tiny requests is bounded too.
	requestFloor = 32 << 10
	// defaultTimeout is the API server's webhook timeout when a request
	// does not say (it sends ?timeout=, timeoutSeconds of the
	// configuration, whose default is the chart's 5 s).
	defaultTimeout = 5 * time.Second
	// bodyDeadline bounds reading one body: the API server sends its body
	// at once.
	bodyDeadline = 3 * time.Second
)

// limit is an http.Handler that admits a request to next only within its
// budget.
type limit struct {
	small, large *semaphore.Weighted
	sources      *sources
	// wait for a share of a budget; zero: a second less than the API
	// server waits for the answer.
	wait time.Duration
	next http.Handler
}

// newLimits returns a wrapper sharing one pair of budgets among every
// handler it wraps.
func newLimits() func(http.Handler) http.Handler {
	small, large, src := semaphore.NewWeighted(smallBytes), semaphore.NewWeighted(largeBytes), &sources{}
	return func(next http.Handler) http.Handler {
		return limit{small: small, large: large, sources: src, next: next}
	}
}

func (l limit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > MaxRequestBytes {
		http.Error(w, "request entity is too large", http.StatusRequestEntityTooLarge)
		return
	}
	timeout := apiTimeout(r)
	wait := l.wait
	if wait == 0 {
		wait = max(timeout-time.Second, time.Second)
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	cost, budget := r.ContentLength, l.large
	switch {
	case cost < 0: // unknown length: count the most it may read
		cost = MaxRequestBytes
	case cost <= smallBody:
		budget = l.small
	}
	cost = max(cost, requestFloor)
	if budget == l.small && l.sources != nil {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		src := l.sources.get(host)
		defer l.sources.put(host, src)
		if err := src.Acquire(ctx, cost); err != nil {
			http.Error(w, "too many admission requests in flight from "+host, http.StatusTooManyRequests)
			return
		}
		defer src.Release(cost)
	}
	// In the shared queue no request waits longer than it would at the
	// default timeout, whatever ?timeout= it names: a sender stretching
	// its own wait would stay ahead of the API server's requests.
	shared, cancelShared := context.WithTimeout(ctx, defaultTimeout-time.Second)
	defer cancelShared()
	if err := budget.Acquire(shared, cost); err != nil {
		http.Error(w, "too many admission requests in flight", http.StatusTooManyRequests)
		return
	}
	defer budget.Release(cost)
	// Not every ResponseWriter supports deadlines (a test recorder); the
	// server's does. The write deadline frees the share of a sender that
	// never reads its answer; the API server has given up by then.
	now := time.Now()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(now.Add(min(bodyDeadline, timeout)))
	_ = rc.SetWriteDeadline(now.Add(timeout))
	l.next.ServeHTTP(w, r)
}

// apiTimeout is how long the API server waits for this answer: its
// ?timeout= (timeoutSeconds of the webhook configuration, 1 to 30 s).
func apiTimeout(r *http.Request) time.Duration {
	t, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil || t <= 0 {
		return defaultTimeout
	}
	return min(t, 30*time.Second)
}

// sources are the per-sender shares of the small budget, each kept while
// a request of its sender is in flight.
type sources struct {
	mu sync.Mutex
	m  map[string]*source
}

type source struct {
	*semaphore.Weighted
	users int
}

func (s *sources) get(host string) *source {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*source{}
	}
	src := s.m[host]
	if src == nil {
		src = &source{Weighted: semaphore.NewWeighted(sourceBytes)}
		s.m[host] = src
	}
	src.users++
	return src
}

func (s *sources) put(host string, src *source) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if src.users--; src.users == 0 {
		delete(s.m, host)
	}
}
