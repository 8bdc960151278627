package webhook

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// TestLimit: a request waits for its share of the body budget before its
// body is read, and is turned away when no share frees in time; a body
// declared larger than the server would read is refused unread; large
// bodies never hold up small ones, and one sender holds at most half of
// the small budget.
func TestLimit(t *testing.T) {
	release := make(chan struct{})
	served := make(chan struct{}, 512)
	l := limit{small: semaphore.NewWeighted(smallBytes), large: semaphore.NewWeighted(largeBytes), sources: &sources{},
		wait: 50 * time.Millisecond,
		next: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served <- struct{}{}; <-release })}
	send := func(from string, size int64) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(""))
		r.RemoteAddr = from + ":40000"
		r.ContentLength = size
		w := httptest.NewRecorder()
		l.ServeHTTP(w, r)
		return w
	}
	done := make(chan int, 512)
	held := 0
	hold := func(from string, size int64) {
		go func() { done <- send(from, size).Code }()
		<-served
		held++
	}
	const stranger, other, apiServer = "192.0.2.7", "192.0.2.8", "198.51.100.1"

	// 1. Too large to read: 413, next never runs.
	if w := send(stranger, MaxRequestBytes+1); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("1. oversized body: %d", w.Code)
	}
	// 2. The largest body takes the large budget...
	hold(stranger, MaxRequestBytes)
	// 3. ...so another large one waits and is turned away, and so is one
	// of unknown length, which counts as the largest...
	if w := send(apiServer, MaxRequestBytes); w.Code != http.StatusTooManyRequests {
		t.Fatalf("3. over the large budget: %d", w.Code)
	}
	if w := send(apiServer, -1); w.Code != http.StatusTooManyRequests {
		t.Fatalf("3. unknown length over the large budget: %d", w.Code)
	}
	// 4. ...while small ones are still served; one sender gets half of
	// the small budget...
	for range sourceBytes / requestFloor {
		hold(stranger, 1<<10)
	}
	if w := send(stranger, 1<<10); w.Code != http.StatusTooManyRequests {
		t.Fatalf("4. one sender over its half: %d", w.Code)
	}
	// 5. ...and another sender the rest, up to the small budget.
	for range (smallBytes - sourceBytes) / requestFloor {
		hold(other, 1<<10)
	}
	if w := send(apiServer, 1<<10); w.Code != http.StatusTooManyRequests {
		t.Fatalf("5. over the small budget: %d", w.Code)
	}
	// 6. Once they finish, a small one is served again, and no sender's
	// share is kept.
	close(release)
	for range held {
		if code := <-done; code != http.StatusOK {
			t.Fatalf("6. a held request ended %d", code)
		}
	}
	if w := send(apiServer, 1<<10); w.Code != http.StatusOK {
		t.Fatalf("6. after the budget frees: %d", w.Code)
	}
	if n := len(l.sources.m); n != 0 {
		t.Errorf("6. %d senders' shares kept", n)
	}
}

// The API server says how long it waits for the answer; the queue and the
// deadlines follow it.
func TestAPITimeout(t *testing.T) {
	for q, want := range map[string]time.Duration{
		"":             defaultTimeout,
		"?timeout=10s": 10 * time.Second,
		"?timeout=5m":  30 * time.Second,
		"?timeout=-1s": defaultTimeout,
		"?timeout=x":   defaultTimeout,
	} {
		if got := apiTimeout(httptest.NewRequest(http.MethodPost, "/validate"+q, nil)); got != want {
			t.Errorf("%q: %v, want %v", q, got, want)
		}
	}
}
