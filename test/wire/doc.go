// Package wire is a test bed on real links, for what the books cannot show:
// which node answers ARP and NDP for an address. It builds network
// namespaces — two nodes and a client on one bridge, the bridge in a
// namespace of its own — runs MetalLB's speaker in each node namespace in
// layer 2 mode, and probes addresses from the client with real ARP
// requests and neighbour solicitations.
//
// Nothing crosses the host's interfaces: each speaker reaches the API
// server through a veth of its own and a TCP proxy bound to the host end of
// that veth, and announces only on the bridge (an L2Advertisement limited
// to the bridge-side interface). Everything the bed makes carries its
// process id in its name; a watchdog removes it when the process dies
// however it dies, and Start sweeps what a dead run left behind.
//
// Its tests (make test) and the playground (make run WIRE=1) use it;
// docs/metallb-iad.md, "What the wire sees", has the figures.
package wire
