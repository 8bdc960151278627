package proc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A port handed to a child is free only until someone else binds it, and
// the child binds it some time later. Ports from the kernel's ephemeral
// range lose that race to any outgoing connection or listener on port 0
// (a plain HTTP metrics server once took a webhook's port that way), so
// FreePort hands out ports from outside that range, never the same one
// twice in this process, and claims each for a while in the temporary
// directory against the other test binaries running beside this one.

// claimFor is how long a claim in the temporary directory holds: the child
// has bound its port long before, or has failed.
const claimFor = 10 * time.Minute

var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a port on host that nothing listens on now and that no
// caller of FreePort was given lately.
func FreePort(host string) (int, error) {
	lo, hi := outsideEphemeral()
	given.Lock()
	defer given.Unlock()
	for range 200 {
		p := lo + rand.IntN(hi-lo)
		if given.ports[p] || !claim(p) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = l.Close()
		given.ports[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port on %s in %d-%d", host, lo, hi-1)
}

// FreeAddr is FreePort's port joined to host.
func FreeAddr(host string) (string, error) {
	p, err := FreePort(host)
	return net.JoinHostPort(host, strconv.Itoa(p)), err
}

// outsideEphemeral is the larger of the ranges [1024, ephemeral's first)
// and (ephemeral's last, 65535], from which FreePort draws.
func outsideEphemeral() (lo, hi int) {
	first, last := 32768, 60999 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if a, err := strconv.Atoi(f[0]); err == nil {
				if b, err := strconv.Atoi(f[1]); err == nil {
					first, last = a, b
				}
			}
		}
	}
	// Ports below 10000 are where the host's own services tend to be.
	below, above := max(first-10000, 0), max(65535-last, 0)
	if below >= above && below >= 1000 {
		return 10000, first
	}
	if above >= 1000 {
		return last + 1, 65536
	}
	return 1024, 65536 // the whole range is ephemeral: nothing better to do
}

// claim marks port as taken in the temporary directory, shared by every
// test binary on the machine; a claim older than claimFor is taken over.
func claim(port int) bool {
	dir := filepath.Join(os.TempDir(), "address-controller-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return true // no directory to share: the in-process set still holds
	}
	path := filepath.Join(dir, strconv.Itoa(port))
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			_ = f.Close()
			return true
		}
		if !errors.Is(err, os.ErrExist) {
			return true
		}
		st, err := os.Stat(path)
		if err != nil || time.Since(st.ModTime()) < claimFor {
			return false
		}
		_ = os.Remove(path)
	}
	return false
}
