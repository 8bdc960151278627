package chaos

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// balancer stands in for the webhook Service in front of the managers: it
// hands each connection to the next manager that accepts one, and drops it
// when none does — the API server then fails closed, as it must.
type balancer struct {
	l        net.Listener
	backends []string
	next     atomic.Uint32
	wg       sync.WaitGroup
}

func newBalancer(addr string, backends []string) (*balancer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	b := &balancer{l: l, backends: backends}
	b.wg.Go(b.serve)
	return b, nil
}

func (b *balancer) serve() {
	for {
		c, err := b.l.Accept()
		if err != nil {
			return
		}
		go b.forward(c)
	}
}

func (b *balancer) forward(c net.Conn) {
	defer func() { _ = c.Close() }()
	first := int(b.next.Add(1))
	for i := range b.backends {
		be, err := net.DialTimeout("tcp", b.backends[(first+i)%len(b.backends)], 500*time.Millisecond)
		if err != nil {
			continue
		}
		defer func() { _ = be.Close() }()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(be, c); done <- struct{}{} }()
		go func() { _, _ = io.Copy(c, be); done <- struct{}{} }()
		<-done
		return
	}
}

func (b *balancer) close() {
	_ = b.l.Close()
	b.wg.Wait()
}
