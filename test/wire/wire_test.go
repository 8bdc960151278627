package wire_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/core"
	"github.com/cozystack/address-controller/internal/driver"
	metallbiad "github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/metallb"
	"github.com/cozystack/address-controller/test/wire"
)

// Probe timing: a request every probeEvery; "never answers" is judged
// over sampleWindow of them, each awaited for probeEvery. In a move,
// answerWait bounds the wait for the reply to each request, on a machine
// busy with other tests: a reply that comes late is still a reply.
const (
	probeEvery   = 100 * time.Millisecond
	answerWait   = time.Second
	sampleWindow = 3 * time.Second
	settle       = 60 * time.Second
)

const (
	driverNamespace = "metallb-iad-system"
	tenant          = "tenant"
	pool            = "wire"
	class           = "wire"
)

// w is the test's world: the API, the bed and its prober, the figures.
type w struct {
	t       *testing.T
	g       Gomega
	ctx     context.Context
	k8s     client.Client
	bed     *wire.Bed
	probe   *wire.Prober
	figures []string
}

// TestWire runs the core, the driver, MetalLB's controller and two
// speakers on the bed, and looks at the wire from the client.
func TestWire(t *testing.T) {
	bin := controlplane.RequireBinaries(t, metallb.Binary, wire.Speaker)
	wire.Require(t)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(&bytes.Buffer{})))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(settle)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)

	cp, err := controlplane.Start(ctx, controlplane.Options{CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd"), metallb.CRDDir(bin)}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	k8s, err := client.New(cp.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	logs := t.TempDir()
	mlbLog, err := os.Create(filepath.Join(logs, "metallb-controller.log"))
	g.Expect(err).NotTo(HaveOccurred())
	mlb, err := metallb.Run(ctx, cp, bin, logs, mlbLog)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = mlb.Stop(5 * time.Second) })
	for _, ns := range []string{driverNamespace, tenant} {
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	runCoreAndDriver(t, cp, scheme)

	speakerLogs := map[string]*syncBuffer{}
	bed, err := wire.Start(ctx, cp, wire.Options{BinDir: bin, Namespace: metallb.Namespace, Pools: []string{pool},
		Output: func(name string) io.Writer {
			speakerLogs[name] = &syncBuffer{}
			return speakerLogs[name]
		}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			for name, b := range speakerLogs {
				t.Logf("speaker %s, last lines:\n%s", name, b.tail(40))
			}
		}
		if err := bed.Close(context.Background()); err != nil {
			t.Errorf("closing the bed: %v", err)
		}
		if left := bed.Leftovers(); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	probe, err := bed.Prober()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(probe.Close)

	g.Expect(k8s.Create(ctx, metallb.Pool(pool, false, "192.0.2.0/28", "2001:db8:77::/124"))).To(Succeed())
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: v1alpha1.IPAddressClassSpec{Provisioner: "metallb.drivers.local.sdn.cozystack.io", ReclaimPolicy: v1alpha1.ReclaimRetain,
			Parameters: &apiruntime.RawExtension{Raw: []byte(`{"pool":"` + pool + `"}`)}}})).To(Succeed())

	x := &w{t: t, g: g, ctx: ctx, k8s: k8s, bed: bed, probe: probe}
	t.Run("AttachedAnswersFromItsNode", x.attachedAnswersFromItsNode)
	t.Run("ReservedAndReleasedNeverAnswer", x.reservedAndReleasedNeverAnswer)
	t.Run("MoveDetachAttach", x.moveDetachAttach)
	t.Run("MoveSharingAPort", x.moveSharingAPort)
	t.Run("ForeignPinNeverAnswers", x.foreignPinNeverAnswers)
	t.Logf("what the wire saw (a probe every %s):\n  %s", probeEvery, strings.Join(x.figures, "\n  "))
}

// runCoreAndDriver runs the core and the driver in this process, each in
// its own manager, as the binaries do without leader election.
func runCoreAndDriver(t *testing.T, cp *controlplane.ControlPlane, scheme *apiruntime.Scheme) {
	coreOpts := core.DefaultOptions()
	coreOpts.SourceAnnotations = metallbiad.BackendAnnotations
	controlplane.RunManager(t, cp.Config, controlplane.ManagerOptions{
		Options: manager.Options{Scheme: scheme, Cache: core.CacheOptions(coreOpts), GracefulShutdownTimeout: ptr.To(5 * time.Second)},
		Setup:   func(ctx context.Context, mgr manager.Manager) error { return core.Setup(ctx, mgr, coreOpts) },
	})
	opts := driver.DefaultOptions()
	opts.Namespace, opts.MetalLBNamespace = driverNamespace, metallb.Namespace
	controlplane.RunManager(t, cp.Config, controlplane.ManagerOptions{
		Options: manager.Options{Scheme: scheme, Cache: driver.CacheOptions(opts), Client: driver.ClientOptions(), GracefulShutdownTimeout: ptr.To(5 * time.Second)},
		Setup:   func(ctx context.Context, mgr manager.Manager) error { return driver.Setup(ctx, mgr, opts) },
	})
}

// An address attached to a Service with a ready endpoint on a node answers
// from that node, and from no other: ARP for IPv4, NDP for IPv6.
func (x *w) attachedAnswersFromItsNode(t *testing.T) {
	n1 := x.bed.Nodes[0]
	ips := x.claim("web", v1alpha1.Dual)
	for _, fam := range []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol} {
		x.create(wire.EndpointSlice(tenant, "web", n1, fam, 80))
	}
	attached := time.Now()
	x.service("web", 80, dualStack, naming("web"))
	for _, ip := range ips {
		first := x.firstAnswer(ip)
		x.record("attach (new Service): %s first answered %s after the Service was created", ip, first.Sub(attached).Round(time.Millisecond))
	}
	for _, ip := range ips {
		x.g.Expect(x.sample(ip, sampleWindow)).To(HaveEach(Equal([]string{n1.MAC.String()})),
			"%s answers from %s's MAC alone, at every probe", ip, n1.Name)
	}
	x.delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "web"}})
}

// A claim's address with no Service is held by its placeholder, which has
// no endpoints: nothing answers for it. Nor for a Released one, though the
// Service that had it still names the claim and has ready endpoints.
func (x *w) reservedAndReleasedNeverAnswer(t *testing.T) {
	n1 := x.bed.Nodes[0]
	idle := x.claim("idle", v1alpha1.Dual)
	for _, ip := range idle {
		x.placeholderHolds(ip)
		x.silent("reserved, no Service", ip)
	}

	ips := x.claim("gone", v1alpha1.IPv4)
	ip := ips[0]
	x.create(wire.EndpointSlice(tenant, "gone", n1, corev1.IPv4Protocol, 80))
	x.service("gone", 80, naming("gone"))
	x.firstAnswer(ip)
	x.delete(&v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "gone"}})
	x.g.Eventually(func(g Gomega) {
		var a v1alpha1.IPAddress
		g.Expect(x.k8s.Get(x.ctx, client.ObjectKey{Name: nameOf(ip)}, &a)).To(Succeed())
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressReleased))
	}).Should(Succeed())
	x.placeholderHolds(ip)
	x.lastAnswer(ip)
	x.silent("Released, its old Service still naming the claim", ip)
}

// A move from Service A (endpoint on n1) to Service B (endpoint on n2):
// B names the claim, then A lets go; probing all along, no request goes
// unanswered. Then a detach silences the address and an attach brings it
// back.
func (x *w) moveDetachAttach(t *testing.T) {
	n1, n2 := x.bed.Nodes[0], x.bed.Nodes[1]
	ip := x.claim("move", v1alpha1.IPv4)[0]
	x.create(wire.EndpointSlice(tenant, "a", n1, corev1.IPv4Protocol, 80))
	x.create(wire.EndpointSlice(tenant, "b", n2, corev1.IPv4Protocol, 8080))
	a := x.service("a", 80, naming("move"))
	x.firstAnswer(ip)

	rec := x.record100ms(ip)
	b := x.service("b", 8080, naming("move"))
	time.Sleep(time.Second) // b waits: the claim is a's
	moved := time.Now()
	x.update(a, func() { delete(a.Annotations, v1alpha1.AnnotationIPAddressClaim) })
	x.g.Eventually(func(g Gomega) { g.Expect(x.ingress(g, "b")).To(Equal([]string{ip})) }).Should(Succeed())
	x.g.Eventually(func(g Gomega) { g.Expect(x.ingress(g, "a")).To(BeEmpty()) }).Should(Succeed())
	x.g.Eventually(func() []string { got, _ := x.probe.Answers(netip.MustParseAddr(ip), probeEvery); return got }).
		Should(Equal([]string{n2.MAC.String()}), "B's node alone answers once the move is done")
	time.Sleep(time.Second)
	samples := rec.stop()
	missed, both := 0, 0
	for _, s := range samples {
		switch len(s.macs) {
		case 0:
			missed++
		case 2:
			both++
		}
	}
	fromN2 := firstFrom(samples, moved, n2.MAC.String())
	x.record("move A→B: %d probes, %d missed, %d answered by both nodes; B's node first answered %s after A let go (%s)",
		len(samples), missed, both, fromN2.Round(time.Millisecond), x.runs(samples))
	x.g.Expect(missed).To(BeZero(), "no request goes unanswered during the move")

	detached := time.Now()
	x.update(b, func() { delete(b.Annotations, v1alpha1.AnnotationIPAddressClaim) })
	last := x.lastAnswer(ip)
	x.record("detach: answers stopped %s after the annotation was removed", last.Sub(detached).Round(time.Millisecond))
	x.placeholderHolds(ip)
	x.silent("detached", ip)

	attach := time.Now()
	x.update(b, func() { metav1.SetMetaDataAnnotation(&b.ObjectMeta, v1alpha1.AnnotationIPAddressClaim, "move") })
	first := x.firstAnswer(ip)
	x.record("attach: answers started %s after the annotation was written", first.Sub(attach).Round(time.Millisecond))
}

// A move between Services with a port in common cannot share the address
// (MetalLB's rule), so it goes through the placeholder, which has no
// endpoints: the address is silent between the detach and the attach. The
// test says how long; it asserts only that the move completes.
func (x *w) moveSharingAPort(t *testing.T) {
	n1, n2 := x.bed.Nodes[0], x.bed.Nodes[1]
	ip := x.claim("cutover", v1alpha1.IPv4)[0]
	x.create(wire.EndpointSlice(tenant, "blue", n1, corev1.IPv4Protocol, 80))
	x.create(wire.EndpointSlice(tenant, "green", n2, corev1.IPv4Protocol, 80))
	blue := x.service("blue", 80, naming("cutover"))
	x.firstAnswer(ip)
	x.g.Expect(x.sample(ip, time.Second)).To(HaveEach(Equal([]string{n1.MAC.String()})))

	rec := x.record100ms(ip)
	x.service("green", 80, naming("cutover"))
	time.Sleep(time.Second)
	moved := time.Now()
	x.update(blue, func() { delete(blue.Annotations, v1alpha1.AnnotationIPAddressClaim) })
	x.g.Eventually(func(g Gomega) { g.Expect(x.ingress(g, "green")).To(Equal([]string{ip})) }).Should(Succeed())
	x.g.Eventually(func() []string { got, _ := x.probe.Answers(netip.MustParseAddr(ip), probeEvery); return got }).
		Should(Equal([]string{n2.MAC.String()}), "green's node alone answers once the move is done")
	time.Sleep(time.Second)
	samples := rec.stop()
	missed := 0
	var silentFrom, silentTo time.Time
	for _, s := range samples {
		if len(s.macs) == 0 {
			missed++
			if silentFrom.IsZero() {
				silentFrom = s.at
			}
			silentTo = s.at
		}
	}
	gap := time.Duration(0)
	if missed > 0 {
		gap = silentTo.Sub(silentFrom) + probeEvery
	}
	x.record("move blue→green, a port in common (through the placeholder): %d probes, %d missed (silent about %s); green answered %s after blue let go (%s)",
		len(samples), missed, gap.Round(10*time.Millisecond), firstFrom(samples, moved, n2.MAC.String()).Round(time.Millisecond), x.runs(samples))
}

// runs is who answered the samples, in runs: "n1×9 n1+n2×1 n2×12".
func (x *w) runs(samples []probeSample) string {
	names := map[string]string{}
	for _, n := range x.bed.Nodes {
		names[n.MAC.String()] = n.Name[strings.LastIndex(n.Name, "-")+1:]
	}
	var out []string
	last, count := "", 0
	flush := func() {
		if count > 0 {
			out = append(out, fmt.Sprintf("%s×%d", last, count))
		}
	}
	for _, s := range samples {
		who := "none"
		if len(s.macs) > 0 {
			var ns []string
			for _, m := range s.macs {
				ns = append(ns, names[m])
			}
			slices.Sort(ns)
			who = strings.Join(ns, "+")
		}
		if who != last {
			flush()
			last, count = who, 0
		}
		count++
	}
	flush()
	return strings.Join(out, " ")
}

// firstFrom is how long after since mac first answered, or -1.
func firstFrom(samples []probeSample, since time.Time, mac string) time.Duration {
	for _, s := range samples {
		if s.at.After(since) && contains(s.macs, mac) {
			return s.at.Sub(since)
		}
	}
	return -1
}

// A Service an admin pins to a reserved address it does not own (past the
// policy) makes nothing answer while the claim is unattached, and while
// the claim is attached only the claim's Service's node answers.
func (x *w) foreignPinNeverAnswers(t *testing.T) {
	n1, n2 := x.bed.Nodes[0], x.bed.Nodes[1]
	ip := x.claim("kept", v1alpha1.IPv4)[0]
	x.placeholderHolds(ip)
	x.create(wire.EndpointSlice(tenant, "thief", n2, corev1.IPv4Protocol, 443))
	x.service("thief", 443, func(s *corev1.Service) {
		s.Annotations = map[string]string{metallbiad.AnnotationLoadBalancerIPs: ip}
	})
	x.silent("pinned by a Service that does not own it", ip)
	var thief corev1.Service
	x.g.Expect(x.k8s.Get(x.ctx, client.ObjectKey{Namespace: tenant, Name: "thief"}, &thief)).To(Succeed())
	x.g.Expect(thief.Status.LoadBalancer.Ingress).To(BeEmpty())

	x.create(wire.EndpointSlice(tenant, "owner", n1, corev1.IPv4Protocol, 80))
	x.service("owner", 80, naming("kept"))
	x.firstAnswer(ip)
	x.g.Expect(x.sample(ip, sampleWindow)).To(HaveEach(Equal([]string{n1.MAC.String()})),
		"only the owner's node answers, never the thief's")
	x.record("foreign pin: never answered from %s's node", n2.Name)
}
