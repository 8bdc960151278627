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
// bodies never hold up small ones.
func TestLimit(t *testing.T) {
	release := make(chan struct{})
	served := make(chan struct{}, 512)
	l := limit{small: semaphore.NewWeighted(smallBytes), large: semaphore.NewWeighted(largeBytes), wait: 50 * time.Millisecond,
		next: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served <- struct{}{}; <-release })}
	send := func(size int64) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(""))
		r.ContentLength = size
		w := httptest.NewRecorder()
		l.ServeHTTP(w, r)
		return w
	}
	done := make(chan int, 512)
	hold := func(size int64) {
		go func() { done <- send(size).Code }()
		<-served
	}

	// 1. Too large to read: 413, next never runs.
	if w := send(MaxRequestBytes + 1); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("1. oversized body: %d", w.Code)
	}
	// 2. Two of the largest bodies take the large budget...
	for range 2 {
		hold(MaxRequestBytes)
	}
	// 3. ...so a third large one waits and is turned away, and so is one
	// of unknown length, which counts as the largest...
	if w := send(MaxRequestBytes); w.Code != http.StatusTooManyRequests {
		t.Fatalf("3. over the large budget: %d", w.Code)
	}
	if w := send(-1); w.Code != http.StatusTooManyRequests {
		t.Fatalf("3. unknown length over the large budget: %d", w.Code)
	}
	// 4. ...while small ones are still served, up to the small budget.
	for range smallBytes / requestFloor {
		hold(1 << 10)
	}
	if w := send(1 << 10); w.Code != http.StatusTooManyRequests {
		t.Fatalf("4. over the small budget: %d", w.Code)
	}
	// 5. Once they finish, a small one is served again.
	close(release)
	for range 2 + smallBytes/requestFloor {
		if code := <-done; code != http.StatusOK {
			t.Fatalf("5. a held request ended %d", code)
		}
	}
	if w := send(1 << 10); w.Code != http.StatusOK {
		t.Fatalf("5. after the budget frees: %d", w.Code)
	}
}
