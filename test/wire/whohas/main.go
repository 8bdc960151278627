// Command whohas asks, from a wire bed's client namespace, which MAC
// answers for each address given: ARP for IPv4, NDP for IPv6, one request
// every 100 ms for a second. With make run WIRE=1 running:
//
//	go run ./test/wire/whohas 198.51.100.0 2001:db8::
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/cozystack/address-controller/test/wire"
)

func main() {
	client := flag.String("client", "", "the client namespace (default: the only live bed's)")
	flag.Parse()
	if err := run(*client, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "whohas:", err)
		os.Exit(1)
	}
}

func run(client string, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: whohas [-client <netns>] <address> [<address>...]")
	}
	if client == "" {
		clients := wire.Clients()
		if len(clients) != 1 {
			return fmt.Errorf("%d wire beds running (%s): name one with -client", len(clients), strings.Join(clients, ", "))
		}
		client = clients[0]
	}
	p, err := wire.ProberIn(client)
	if err != nil {
		return err
	}
	defer p.Close()
	for _, arg := range args {
		ip, err := netip.ParseAddr(arg)
		if err != nil {
			return err
		}
		answered, macs := 0, map[string]int{}
		const probes = 10
		for range probes {
			start := time.Now()
			got, err := p.Answers(ip, 100*time.Millisecond)
			if err != nil {
				return err
			}
			if len(got) > 0 {
				answered++
			}
			for _, m := range got {
				macs[m]++
			}
			time.Sleep(time.Until(start.Add(100 * time.Millisecond)))
		}
		if answered == 0 {
			fmt.Printf("%s: no answer to %d requests\n", ip, probes)
			continue
		}
		fmt.Printf("%s: answered %d of %d requests, by %v\n", ip, answered, probes, macs)
	}
	return nil
}
