package chaos

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// crashProxy stands between the binaries and the API server and counts
// each binary's writes; armed, it kills the binary right after the API
// server has carried out its n-th write and before the binary learns the
// outcome — the crash a write sequence must survive at every step.
type crashProxy struct {
	srv *http.Server
	url string

	mu sync.Mutex
	// writes counts each binary's writes (by user agent), lastWrite dates
	// the newest, and arms are the kills waiting for a count.
	writes    map[string]int
	lastWrite time.Time
	arms      map[string]*arm
}

// arm kills a binary once it has written after more times.
type arm struct {
	after int
	kill  func()
	fired chan struct{}
	// wrote describes each write counted, for the report.
	wrote []string
}

// newCrashProxy serves on a free loopback port, forwarding to apiServer
// with cfg's transport (its CA); the binaries authenticate as themselves,
// their bearer tokens passed through.
func newCrashProxy(t *testing.T, apiServer string, cfg *rest.Config) *crashProxy {
	target, err := url.Parse(apiServer)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := rest.TLSConfigFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	p := &crashProxy{writes: map[string]int{}, arms: map[string]*arm{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 64}
	rp.FlushInterval = -1 // watches stream
	rp.ModifyResponse = p.observe
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.url = "http://" + l.Addr().String()
	p.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.srv.Shutdown(ctx)
	})
	return p
}

// writer is the binary a request comes from, by its user agent (the
// binaries set it to their name): "" for any other client.
func writer(r *http.Request) string {
	ua := r.Header.Get("User-Agent")
	for _, name := range []string{"address-controller", "metallb-iad"} {
		if ua == name || strings.HasPrefix(ua, name+"/") {
			return name
		}
	}
	return ""
}

// counted reports whether r is a write of the controllers' state: not a
// Lease (leader election), an Event, or a review of who the caller is.
func counted(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return false
	}
	for _, skip := range []string{"/leases", "/events", "authentication.k8s.io", "authorization.k8s.io"} {
		if strings.Contains(r.URL.Path, skip) {
			return false
		}
	}
	return true
}

// observe runs once the API server has answered: a successful write is
// counted, and the armed binary is killed before the answer reaches it.
func (p *crashProxy) observe(resp *http.Response) error {
	r := resp.Request
	who := writer(r)
	if who == "" || !counted(r) || resp.StatusCode >= 300 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writes[who]++
	p.lastWrite = time.Now()
	a := p.arms[who]
	if a == nil {
		return nil
	}
	a.wrote = append(a.wrote, r.Method+" "+r.URL.Path)
	if len(a.wrote) == a.after {
		delete(p.arms, who)
		a.kill()
		close(a.fired)
	}
	return nil
}

// arm makes the after-th write of binary from now on its last.
func (p *crashProxy) arm(binary string, after int, kill func()) *arm {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := &arm{after: after, kill: kill, fired: make(chan struct{})}
	p.arms[binary] = a
	return a
}

// disarm removes binary's arm; it returns the writes the arm counted.
func (p *crashProxy) disarm(binary string, a *arm) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.arms[binary] == a {
		delete(p.arms, binary)
	}
	return append([]string(nil), a.wrote...)
}

// quietFor reports whether no binary has written for d.
func (p *crashProxy) quietFor(d time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Since(p.lastWrite) >= d
}
