package wire

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
)

// Prober asks, from the client namespace, who answers for an address: an
// ARP request for IPv4, a neighbour solicitation for IPv6, as a host on
// the segment resolving it would.
type Prober struct {
	mu  sync.Mutex
	arp *arp.Client
	ndp *ndp.Conn
	mac net.HardwareAddr
	ip4 netip.Addr // the client's IPv4 address on the bridge: replies go to it
}

// Prober opens the client's ARP and NDP sockets.
func (b *Bed) Prober() (*Prober, error) { return ProberIn(b.Client) }

// ProberIn opens ARP and NDP sockets on the bridge link of the client
// namespace named client (a bed's Client).
func ProberIn(client string) (*Prober, error) {
	p := &Prober{}
	err := inNetns(client, func() error {
		ifi, err := net.InterfaceByName(Interface)
		if err != nil {
			return err
		}
		p.mac = ifi.HardwareAddr
		addrs, err := ifi.Addrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				p.ip4, _ = netip.AddrFromSlice(n.IP.To4())
			}
		}
		if p.arp, err = arp.Dial(ifi); err != nil {
			return fmt.Errorf("ARP socket: %w", err)
		}
		if p.ndp, _, err = ndp.Listen(ifi, ndp.LinkLocal); err != nil {
			return fmt.Errorf("NDP socket: %w", err)
		}
		// Only advertisements: the socket would read every ICMPv6
		// message on the link (its own solicitations, MLD reports).
		var f ipv6.ICMPFilter
		f.SetAll(true)
		f.Accept(ipv6.ICMPTypeNeighborAdvertisement)
		return p.ndp.SetICMPFilter(&f)
	})
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close closes the sockets.
func (p *Prober) Close() {
	if p.arp != nil {
		_ = p.arp.Close()
	}
	if p.ndp != nil {
		_ = p.ndp.Close()
	}
}

// linger is how long a probe keeps listening after its first answer: a
// second node answering the same request does so within microseconds.
const linger = 30 * time.Millisecond

// Answers sends one request for ip and returns the hardware addresses that
// answer for ip, in order of arrival: it waits at most wait for the first
// answer, then linger for more. Everything that claims ip counts: replies,
// announcements (gratuitous ARP, unsolicited advertisements), and answers
// that came after the previous probe stopped listening — the question is
// whether anything answers for ip at all.
func (p *Prober) Answers(ip netip.Addr, wait time.Duration) ([]string, error) {
	return p.probe(ip, wait, false)
}

// Replies is Answers counting only replies to this very request: an
// announcement that happens to come meanwhile does not answer it.
func (p *Prober) Replies(ip netip.Addr, wait time.Duration) ([]string, error) {
	return p.probe(ip, wait, true)
}

func (p *Prober) probe(ip netip.Addr, wait time.Duration, repliesOnly bool) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ip.Is4() {
		return p.arpAnswers(ip, wait, repliesOnly)
	}
	return p.ndpAnswers(ip, wait, repliesOnly)
}

// answer is one packet read: who claims the address ("" for a packet that
// claims nothing), and whether it replies to the prober's request.
type answer struct {
	mac   string
	reply bool
}

func (p *Prober) arpAnswers(ip netip.Addr, wait time.Duration, repliesOnly bool) ([]string, error) {
	read := func() (answer, error) {
		pkt, _, err := p.arp.Read()
		if err != nil {
			return answer{}, err
		}
		if pkt.SenderIP != ip || slices.Equal(pkt.SenderHardwareAddr, p.mac) {
			return answer{}, nil
		}
		reply := pkt.Operation == arp.OperationReply && pkt.TargetIP == p.ip4 && slices.Equal(pkt.TargetHardwareAddr, p.mac)
		return answer{mac: pkt.SenderHardwareAddr.String(), reply: reply}, nil
	}
	return collect(p.arp.SetReadDeadline, read, func() error { return p.arp.Request(ip) }, wait, repliesOnly)
}

func (p *Prober) ndpAnswers(ip netip.Addr, wait time.Duration, repliesOnly bool) ([]string, error) {
	group, err := ndp.SolicitedNodeMulticast(ip)
	if err != nil {
		return nil, err
	}
	ns := &ndp.NeighborSolicitation{TargetAddress: ip, Options: []ndp.Option{
		&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: p.mac},
	}}
	read := func() (answer, error) {
		msg, _, _, err := p.ndp.ReadFrom()
		if err != nil {
			return answer{}, err
		}
		na, ok := msg.(*ndp.NeighborAdvertisement)
		if !ok || na.TargetAddress != ip {
			return answer{}, nil
		}
		a := answer{mac: "(no link-layer address)", reply: na.Solicited}
		for _, o := range na.Options {
			if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Target {
				a.mac = lla.Addr.String()
			}
		}
		return a, nil
	}
	return collect(p.ndp.SetReadDeadline, read, func() error { return p.ndp.WriteTo(ns, nil, group) }, wait, repliesOnly)
}

// collect reads what is pending, sends, and gathers what read returns
// (an error for a packet it cannot parse) until wait passes without an
// answer, or linger after the first. What was pending counts unless only
// replies do: it answered an earlier request, or announced.
func collect(setDeadline func(time.Time) error, read func() (answer, error), send func() error, wait time.Duration, repliesOnly bool) ([]string, error) {
	if err := setDeadline(time.Now().Add(time.Millisecond)); err != nil {
		return nil, err
	}
	var macs []string
	for {
		a, err := read()
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) {
			break
		}
		if err == nil && a.mac != "" && !repliesOnly {
			macs = appendNew(macs, a.mac)
		}
	}
	if err := send(); err != nil {
		return nil, err
	}
	if err := setDeadline(time.Now().Add(wait)); err != nil {
		return nil, err
	}
	answered := false
	for {
		a, err := read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return macs, nil
		}
		if errors.Is(err, net.ErrClosed) {
			return macs, err
		}
		if err != nil || a.mac == "" || (repliesOnly && !a.reply) {
			continue
		}
		if !answered {
			answered = true
			if err := setDeadline(time.Now().Add(linger)); err != nil {
				return nil, err
			}
		}
		macs = appendNew(macs, a.mac)
	}
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}
