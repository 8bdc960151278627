package chaos

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
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
// outcome — the crash a write sequence must survive at every step. It
// serves TLS (client-go sends credentials over nothing else) with a
// certificate of its own, which the binaries' kubeconfigs trust.
type crashProxy struct {
	srv *httptest.Server
	// url is where it serves, ca its certificate (PEM).
	url string
	ca  []byte

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

// newCrashProxy serves on a loopback port, forwarding to apiServer with
// cfg's CA; the binaries authenticate as themselves, their bearer tokens
// passed through.
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
	rp.Transport = &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: 64}
	rp.FlushInterval = -1 // watches stream
	rp.ModifyResponse = p.observe
	// A killed binary breaks its connections: nothing to report.
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	p.srv = httptest.NewUnstartedServer(rp)
	p.srv.StartTLS()
	t.Cleanup(func() {
		p.srv.CloseClientConnections() // the binaries' watches would hold Close
		p.srv.Close()
	})
	p.url = p.srv.URL
	p.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
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
