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
// declared larger than the server would read is refused unread.
func TestLimit(t *testing.T) {
	release := make(chan struct{})
	served := make(chan struct{}, 8)
	l := limit{budget: semaphore.NewWeighted(inFlightBytes), wait: 50 * time.Millisecond,
		next: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served <- struct{}{}; <-release })}
	send := func(size int64) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(""))
		r.ContentLength = size
		w := httptest.NewRecorder()
		l.ServeHTTP(w, r)
		return w
	}

	// 1. Too large to read: 413, next never runs.
	if w := send(MaxRequestBytes + 1); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("1. oversized body: %d", w.Code)
	}
	// 2. Two of the largest bodies take the whole budget...
	for range 2 {
		go send(MaxRequestBytes)
		<-served
	}
	// 3. ...so a third request, even a small one, waits and is turned away.
	if w := send(1 << 10); w.Code != http.StatusTooManyRequests {
		t.Fatalf("3. over budget: %d", w.Code)
	}
	// 4. Once they finish, it is served.
	close(release)
	if w := send(1 << 10); w.Code != http.StatusOK {
		t.Fatalf("4. after the budget frees: %d", w.Code)
	}
	// 5. An unknown length counts as the largest body.
	l.budget = semaphore.NewWeighted(MaxRequestBytes - 1)
	if w := send(-1); w.Code != http.StatusTooManyRequests {
		t.Fatalf("5. unknown length within a budget smaller than the largest body: %d", w.Code)
	}
}
