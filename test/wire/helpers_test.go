package wire_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// claim creates a claim of the class and returns its bound addresses,
// IPv4 first.
func (x *w) claim(name string, family v1alpha1.IPFamily) []string {
	x.t.Helper()
	x.create(&v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: class, Family: family}})
	want := 1
	if family == v1alpha1.Dual {
		want = 2
	}
	var ips []string
	x.g.Eventually(func(g Gomega) {
		var c v1alpha1.IPAddressClaim
		g.Expect(x.k8s.Get(x.ctx, client.ObjectKey{Namespace: tenant, Name: name}, &c)).To(Succeed())
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
		g.Expect(c.Status.Addresses).To(HaveLen(want))
		ips = nil
		for _, a := range c.Status.Addresses {
			ips = append(ips, a.Address)
		}
	}).Should(Succeed(), "claim %s binds", name)
	slices.SortFunc(ips, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
	return ips
}

func (x *w) create(obj client.Object) {
	x.t.Helper()
	x.g.Expect(x.k8s.Create(x.ctx, obj)).To(Succeed())
}

func (x *w) delete(obj client.Object) {
	x.t.Helper()
	x.g.Expect(client.IgnoreNotFound(x.k8s.Delete(x.ctx, obj))).To(Succeed())
}

// update applies mutate to the latest obj until the write succeeds.
func (x *w) update(obj client.Object, mutate func()) {
	x.t.Helper()
	x.g.Eventually(func() error {
		if err := x.k8s.Get(x.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate()
		return x.k8s.Update(x.ctx, obj)
	}).Should(Succeed())
}

// service creates a LoadBalancer Service of the tenant on port whose
// traffic stays on the nodes of its endpoints, so that MetalLB's speaker
// announces it from there.
func (x *w) service(name string, port int32, mods ...func(*corev1.Service)) *corev1.Service {
	x.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports:                 []corev1.ServicePort{{Name: "p", Protocol: corev1.ProtocolTCP, Port: port}},
		},
	}
	for _, m := range mods {
		m(svc)
	}
	x.create(svc)
	return svc
}

func naming(claim string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Annotations = map[string]string{v1alpha1.AnnotationIPAddressClaim: claim}
	}
}

func dualStack(s *corev1.Service) {
	s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
}

// ingress is the tenant Service's addresses in MetalLB's status.
func (x *w) ingress(g Gomega, name string) []string {
	return ingressOf(x, g, tenant, name)
}

func ingressOf(x *w, g Gomega, namespace, name string) []string {
	var svc corev1.Service
	g.Expect(x.k8s.Get(x.ctx, client.ObjectKey{Namespace: namespace, Name: name}, &svc)).To(Succeed())
	var ips []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ips = append(ips, in.IP)
	}
	return ips
}

// placeholderHolds waits until ip is on its placeholder in MetalLB's books.
func (x *w) placeholderHolds(ip string) {
	x.t.Helper()
	x.g.Eventually(func(g Gomega) {
		g.Expect(ingressOf(x, g, driverNamespace, nameOf(ip))).To(Equal([]string{ip}))
	}).Should(Succeed(), "the placeholder holds %s", ip)
}

func nameOf(ip string) string {
	n, err := v1alpha1.IPAddressName(ip)
	if err != nil {
		panic(err)
	}
	return n
}

// firstAnswer probes ip until something answers and returns when.
func (x *w) firstAnswer(ip string) time.Time {
	x.t.Helper()
	addr := netip.MustParseAddr(ip)
	deadline := time.Now().Add(settle)
	for time.Now().Before(deadline) {
		got, err := x.probe.Answers(addr, probeEvery)
		x.g.Expect(err).NotTo(HaveOccurred())
		if len(got) > 0 {
			return time.Now()
		}
	}
	x.t.Fatalf("nothing answered for %s within %s", ip, settle)
	return time.Time{}
}

// lastAnswer probes ip until a second of probes goes unanswered and
// returns when the last answer came.
func (x *w) lastAnswer(ip string) time.Time {
	x.t.Helper()
	addr := netip.MustParseAddr(ip)
	last := time.Now()
	deadline := last.Add(settle)
	for time.Now().Before(deadline) {
		got, err := x.probe.Answers(addr, probeEvery)
		x.g.Expect(err).NotTo(HaveOccurred())
		if len(got) > 0 {
			last = time.Now()
		} else if time.Since(last) > time.Second {
			return last
		}
	}
	x.t.Fatalf("%s still answered after %s", ip, settle)
	return time.Time{}
}

// sample probes ip back to back for window and returns who answered each.
func (x *w) sample(ip string, window time.Duration) [][]string {
	x.t.Helper()
	addr := netip.MustParseAddr(ip)
	var all [][]string
	for end := time.Now().Add(window); time.Now().Before(end); {
		got, err := x.probe.Answers(addr, probeEvery)
		x.g.Expect(err).NotTo(HaveOccurred())
		all = append(all, got)
	}
	return all
}

// silent checks that nothing answers for ip over the sampling window.
func (x *w) silent(what, ip string) {
	x.t.Helper()
	got := x.sample(ip, sampleWindow)
	answered := 0
	for _, macs := range got {
		if len(macs) > 0 {
			answered++
		}
	}
	x.record("%s: %s answered %d of %d probes over %s", what, ip, answered, len(got), sampleWindow)
	x.g.Expect(answered).To(BeZero(), "%s: nothing answers for %s", what, ip)
}

func (x *w) record(format string, args ...any) {
	x.figures = append(x.figures, fmt.Sprintf(format, args...))
}

// probeSample is one probe: when it was sent and who answered.
type probeSample struct {
	at   time.Time
	macs []string
}

// recorder probes one address every probeEvery until stopped; a probe
// counts as answered if a reply to it comes within answerWait.
type recorder struct {
	done    chan struct{}
	mu      sync.Mutex
	samples []probeSample
	err     error
	wg      sync.WaitGroup
}

func (x *w) record100ms(ip string) *recorder {
	r := &recorder{done: make(chan struct{})}
	addr := netip.MustParseAddr(ip)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-r.done:
				return
			default:
			}
			at := time.Now()
			got, err := x.probe.Replies(addr, answerWait)
			r.mu.Lock()
			if err != nil && r.err == nil {
				r.err = err
			}
			r.samples = append(r.samples, probeSample{at: at, macs: got})
			r.mu.Unlock()
			time.Sleep(time.Until(at.Add(probeEvery)))
		}
	}()
	return r
}

func (r *recorder) stop() []probeSample {
	close(r.done)
	r.wg.Wait()
	return r.samples
}

func contains(s []string, v string) bool { return slices.Contains(s, v) }

// syncBuffer keeps a speaker's output for a failing test to show.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := strings.Split(strings.TrimRight(s.b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
