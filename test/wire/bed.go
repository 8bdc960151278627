package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/proc"
)

// Speaker is MetalLB's speaker binary, relative to the control plane's bin
// directory (the Makefile builds it from tools/metallb).
const Speaker = "metallb-speaker"

// Interface is the name of every member's link to the bridge, the only
// interface the speakers announce on.
const Interface = "wire0"

// LabelBed marks the bed's Nodes; its L2Advertisement selects them by it.
const LabelBed = "test.local.sdn.cozystack.io/wire-bed"

// Require skips the test, in one line saying why, when this machine cannot
// run the bed — or fails it when CI is set: the machines CI runs on have
// root and network namespaces, so there it is a broken setup.
func Require(t testing.TB) {
	t.Helper()
	if reason := Unavailable(); reason != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("wire: %s ($CI is set, and CI's machines have root and network namespaces)", reason)
		}
		t.Skip("wire: " + reason)
	}
}

// Options configure Start.
type Options struct {
	// BinDir holds the speaker. Empty means the control plane's.
	BinDir string
	// Namespace is MetalLB's namespace.
	Namespace string
	// Pools are the IPAddressPools the bed's L2Advertisement announces;
	// none means every pool.
	Pools []string
	// Output returns where a speaker's logs go (nil discards them).
	Output func(speaker string) io.Writer
}

// Node is a node namespace: a Node object of the same name, a speaker,
// and a link to the bridge.
type Node struct {
	Name string
	// MAC is the hardware address of its link to the bridge: the one its
	// speaker answers with.
	MAC net.HardwareAddr

	hostLink string // the host end of its link to the API server
	proxy    net.Listener
	speaker  *proc.Process
}

// Bed is a running test bed.
type Bed struct {
	// Nodes are the two node namespaces.
	Nodes []*Node
	// Client is the client namespace, where probes come from.
	Client string

	prefix     string
	namespaces []string
	k8s        client.Client
	opts       Options
	disarm     func()
	proxies    sync.WaitGroup
	closeOnce  sync.Once
	closeErr   error
}

// Member addresses on the bridge (link-local, inside the namespaces only).
var memberAddrs = map[string]string{"n1": "169.254.1.1/24", "n2": "169.254.1.2/24", "client": "169.254.1.100/24"}

var (
	startMu sync.Mutex
	started bool
)

// Start builds the bed next to the control plane cp — namespaces, links,
// proxies, a Node and a speaker Pod object per node, an L2Advertisement —
// and returns once both speakers answer on the bridge. One bed per process.
func Start(ctx context.Context, cp *controlplane.ControlPlane, opts Options) (_ *Bed, err error) {
	if reason := Unavailable(); reason != "" {
		return nil, errors.New(reason)
	}
	startMu.Lock()
	defer startMu.Unlock()
	if started {
		return nil, errors.New("one wire bed per process")
	}
	if opts.BinDir == "" {
		if opts.BinDir, err = controlplane.BinDir(); err != nil {
			return nil, err
		}
	}
	if opts.Output == nil {
		opts.Output = func(string) io.Writer { return nil }
	}
	k8s, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return nil, err
	}
	sweep()
	pid := os.Getpid()
	b := &Bed{prefix: fmt.Sprintf("%s-%d-", namePrefix, pid), k8s: k8s, opts: opts}
	b.Client = b.prefix + "client"
	for _, n := range []string{"n1", "n2"} {
		b.Nodes = append(b.Nodes, &Node{Name: b.prefix + n, hostLink: fmt.Sprintf("%s%d%s", namePrefix, pid, n)})
	}
	b.namespaces = []string{b.prefix + "sw", b.Nodes[0].Name, b.Nodes[1].Name, b.Client}
	if b.disarm, err = startWatchdog(b.namespaces); err != nil {
		return nil, err
	}
	started = true
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Close(context.WithoutCancel(ctx)))
		}
	}()
	if err := b.links(); err != nil {
		return nil, err
	}
	if err := b.objects(ctx); err != nil {
		return nil, err
	}
	if err := b.speakers(ctx, cp); err != nil {
		return nil, err
	}
	return b, nil
}

// links makes the namespaces, the bridge and every link.
func (b *Bed) links() error {
	sw := b.prefix + "sw"
	for _, ns := range b.namespaces {
		if err := ip("netns", "add", ns); err != nil {
			return err
		}
		// No duplicate address detection: the link-local addresses the
		// speakers' and the prober's NDP sockets bind are usable at once.
		if err := ip("netns", "exec", ns, "sh", "-c",
			"echo 0 > /proc/sys/net/ipv6/conf/all/accept_dad && echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad"); err != nil {
			return err
		}
		if err := ip("-n", ns, "link", "set", "lo", "up"); err != nil {
			return err
		}
	}
	// The bridge floods multicast: no snooping, so neighbour solicitations
	// reach a speaker whatever its group joins.
	for _, args := range [][]string{
		{"-n", sw, "link", "add", "br0", "type", "bridge", "stp_state", "0", "mcast_snooping", "0"},
		{"-n", sw, "link", "set", "br0", "up"},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	members := map[string]string{b.Nodes[0].Name: "n1", b.Nodes[1].Name: "n2", b.Client: "client"}
	for _, ns := range b.namespaces[1:] {
		port := "p-" + members[ns]
		for _, args := range [][]string{
			{"-n", sw, "link", "add", port, "type", "veth", "peer", "name", Interface, "netns", ns},
			{"-n", sw, "link", "set", port, "master", "br0", "up"},
			{"-n", ns, "addr", "add", memberAddrs[members[ns]], "dev", Interface},
			{"-n", ns, "link", "set", Interface, "up"},
		} {
			if err := ip(args...); err != nil {
				return err
			}
		}
	}
	// Every destination is on the client's link, so that a ping from it
	// resolves any address with ARP or NDP on the bridge.
	for _, args := range [][]string{
		{"-n", b.Client, "route", "add", "default", "dev", Interface},
		{"-n", b.Client, "-6", "route", "add", "default", "dev", Interface},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	octet, err := freeLinkLocal()
	if err != nil {
		return err
	}
	for i, n := range b.Nodes {
		host := fmt.Sprintf("169.254.%d.%d", octet, 4*i+1)
		for _, args := range [][]string{
			{"link", "add", n.hostLink, "type", "veth", "peer", "name", "api0", "netns", n.Name},
			{"addr", "add", host + "/30", "dev", n.hostLink},
			{"link", "set", n.hostLink, "up"},
			{"-n", n.Name, "addr", "add", fmt.Sprintf("169.254.%d.%d/30", octet, 4*i+2), "dev", "api0"},
			{"-n", n.Name, "link", "set", "api0", "up"},
		} {
			if err := ip(args...); err != nil {
				return err
			}
		}
		if n.proxy, err = net.Listen("tcp", host+":0"); err != nil {
			return err
		}
		if err := inNetns(n.Name, func() error {
			ifi, err := net.InterfaceByName(Interface)
			if err == nil {
				n.MAC = ifi.HardwareAddr
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// freeLinkLocal is a third octet of 169.254.0.0/16 no address of the host
// namespace uses, for the /30s of the links to the API server.
func freeLinkLocal() (int, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return 0, err
	}
	used := map[int]bool{}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.To4()[0] == 169 && n.IP.To4()[1] == 254 {
			used[int(n.IP.To4()[2])] = true
		}
	}
	start := 2 + os.Getpid()%250
	for i := range 250 {
		if o := 2 + (start-2+i)%250; !used[o] {
			return o, nil
		}
	}
	return 0, errors.New("no free /24 in 169.254.0.0/16 for the links to the API server")
}

// objects creates what the speakers need in the cluster.
func (b *Bed) objects(ctx context.Context) error {
	for _, n := range b.Nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{LabelBed: strings.TrimSuffix(b.prefix, "-")}}}
		// The speaker reads its own Pod (it owns its status objects).
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: b.opts.Namespace, Name: "speaker-" + n.Name, Labels: map[string]string{"app": "metallb", "component": "speaker"}},
			Spec:       corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "speaker", Image: "quay.io/metallb/speaker"}}},
		}
		for _, obj := range []client.Object{node, pod} {
			if err := b.k8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating %s: %w", obj.GetName(), err)
			}
		}
	}
	adv := &unstructured.Unstructured{}
	adv.SetAPIVersion("metallb.io/v1beta1")
	adv.SetKind("L2Advertisement")
	adv.SetNamespace(b.opts.Namespace)
	adv.SetName(strings.TrimSuffix(b.prefix, "-"))
	spec := map[string]any{
		"interfaces":    []any{Interface},
		"nodeSelectors": []any{map[string]any{"matchLabels": map[string]any{LabelBed: strings.TrimSuffix(b.prefix, "-")}}},
	}
	if len(b.opts.Pools) > 0 {
		pools := make([]any, 0, len(b.opts.Pools))
		for _, p := range b.opts.Pools {
			pools = append(pools, p)
		}
		spec["ipAddressPools"] = pools
	}
	adv.Object["spec"] = spec
	if err := b.k8s.Create(ctx, adv); err != nil {
		return fmt.Errorf("creating the L2Advertisement: %w", err)
	}
	return nil
}

// speakers starts a proxy and a speaker per node and waits until both
// speakers have their ARP and NDP responders on the bridge link and have
// loaded the Services.
func (b *Bed) speakers(ctx context.Context, cp *controlplane.ControlPlane) error {
	api, err := url.Parse(cp.Config.Host)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", b.prefix)
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }() // read once, at the speaker's start
	var ready []<-chan struct{}
	for _, n := range b.Nodes {
		b.proxies.Add(1)
		go func() {
			defer b.proxies.Done()
			forward(n.proxy, api.Host)
		}()
		kubeconfig := filepath.Join(dir, n.Name+".kubeconfig")
		if err := writeKubeconfig(cp.Kubeconfig, "https://"+n.proxy.Addr().String(), kubeconfig); err != nil {
			return err
		}
		w := newReadyWatch(b.opts.Output(n.Name))
		ready = append(ready, w.ready)
		path := filepath.Join(b.opts.BinDir, Speaker)
		if n.speaker, err = proc.Start("speaker "+n.Name, "ip", []string{"netns", "exec", n.Name, path,
			"--node-name=" + n.Name, "--namespace=" + b.opts.Namespace, "--pod-name=speaker-" + n.Name,
			"--kubeconfig=" + kubeconfig, "--host=127.0.0.1", "--port=7472", "--log-level=info",
		}, w); err != nil {
			return err
		}
	}
	for i, r := range ready {
		select {
		case <-r:
		case <-b.Nodes[i].speaker.Done():
			return fmt.Errorf("speaker on %s exited: %w", b.Nodes[i].Name, b.Nodes[i].speaker.Err())
		case <-ctx.Done():
			return fmt.Errorf("speaker on %s: no responders on %s, or Services not loaded: %w", b.Nodes[i].Name, Interface, ctx.Err())
		}
	}
	return nil
}

// writeKubeconfig writes the admin kubeconfig pointed at server, checking
// the API server's certificate for the name it was issued to.
func writeKubeconfig(admin []byte, server, path string) error {
	cfg, err := clientcmd.Load(admin)
	if err != nil {
		return err
	}
	for _, c := range cfg.Clusters {
		c.Server = server
		c.TLSServerName = "localhost"
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// forward copies every connection l accepts to and from target, until l
// is closed.
func forward(l net.Listener, target string) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = in.Close() }()
			out, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				return
			}
			defer func() { _ = out.Close() }()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
			<-done
		}()
	}
}

// readyWatch passes a speaker's output on and closes ready once the
// speaker has made both its responders on the bridge link and done its
// initial load of Services: a Service event before that load is dropped by
// the speaker (the load itself covers it), and once a Service created then
// was never announced (make test, once).
type readyWatch struct {
	out   io.Writer
	ready chan struct{}
	mu    sync.Mutex
	seen  map[string]bool
	tail  string
}

func newReadyWatch(out io.Writer) *readyWatch {
	return &readyWatch{out: out, ready: make(chan struct{}), seen: map[string]bool{}}
}

func (w *readyWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	if len(w.seen) < 3 {
		lines := strings.Split(w.tail+string(p), "\n")
		w.tail = lines[len(lines)-1]
		for _, l := range lines[:len(lines)-1] {
			if strings.Contains(l, `"ServiceReconciler - reprocessAll"`) && strings.Contains(l, `"end reconcile"`) {
				w.seen["initial load"] = true
			}
			if !strings.Contains(l, `"interface":"`+Interface+`"`) {
				continue
			}
			for _, ev := range []string{"createARPResponder", "createNDPResponder"} {
				if strings.Contains(l, `"event":"`+ev+`"`) {
					w.seen[ev] = true
				}
			}
		}
		if len(w.seen) == 3 {
			close(w.ready)
		}
	}
	w.mu.Unlock()
	if w.out == nil {
		return len(p), nil
	}
	return w.out.Write(p)
}

// Close stops the speakers and proxies, deletes the bed's objects and
// removes its namespaces. It is safe to call more than once.
func (b *Bed) Close(ctx context.Context) error {
	b.closeOnce.Do(func() {
		var errs []error
		for _, n := range b.Nodes {
			if n.speaker != nil {
				errs = append(errs, n.speaker.Stop(5*time.Second))
			}
			if n.proxy != nil {
				_ = n.proxy.Close()
			}
		}
		b.proxies.Wait()
		for _, ns := range slices.Backward(b.namespaces) {
			removeNetns(ns)
		}
		for _, n := range b.Nodes {
			_ = ip("link", "del", n.hostLink) // gone with its peer already, unless that never moved
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for _, n := range b.Nodes {
			for _, obj := range []client.Object{
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: b.opts.Namespace, Name: "speaker-" + n.Name}},
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}},
			} {
				if err := b.k8s.Delete(ctx, obj, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
					errs = append(errs, err)
				}
			}
		}
		adv := &unstructured.Unstructured{}
		adv.SetAPIVersion("metallb.io/v1beta1")
		adv.SetKind("L2Advertisement")
		adv.SetNamespace(b.opts.Namespace)
		adv.SetName(strings.TrimSuffix(b.prefix, "-"))
		if err := b.k8s.Delete(ctx, adv); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
		}
		if b.disarm != nil {
			b.disarm()
		}
		startMu.Lock()
		started = false
		startMu.Unlock()
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

// Leftovers lists the bed's namespaces and host links still present: none
// after Close.
func (b *Bed) Leftovers() []string {
	var left []string
	for _, ns := range b.namespaces {
		if _, err := os.Stat(filepath.Join(netnsDir, ns)); err == nil {
			left = append(left, "netns "+ns)
		}
	}
	for _, n := range b.Nodes {
		if _, err := net.InterfaceByName(n.hostLink); err == nil {
			left = append(left, "link "+n.hostLink)
		}
	}
	return left
}

// EndpointSlice is a ready endpoint of Service namespace/service on node,
// of family, serving port: what MetalLB's speaker elects its announcer by.
func EndpointSlice(namespace, service string, node *Node, family corev1.IPFamily, port int32) *discoveryv1.EndpointSlice {
	addressType, addr := discoveryv1.AddressTypeIPv4, "10.244.0.10"
	if family == corev1.IPv6Protocol {
		addressType, addr = discoveryv1.AddressTypeIPv6, "fd00:10:244::10"
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: fmt.Sprintf("%s-%s", service, strings.ToLower(string(family))),
			Labels: map[string]string{discoveryv1.LabelServiceName: service},
		},
		AddressType: addressType,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{addr},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(node.Name),
		}},
		Ports: []discoveryv1.EndpointPort{{Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}
