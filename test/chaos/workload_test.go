package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	mlb "github.com/cozystack/address-controller/test/metallb"
)

// The classes the workload draws from: two of the driver's, over a pool
// each (Retain recycling after a delay, and Delete, the auto-claim class),
// and a static one whose addresses an admin pre-provisions, fewer than the
// claims that want them.
const (
	retainClass = "chaos-retain"
	deleteClass = "chaos-delete"
	staticClass = "chaos-static"
	// staticProvisioner serves no claim: the core matches them.
	staticProvisioner = "static.example.com"
	// staticAddresses are pre-provisioned for staticClass.
	staticAddresses = 4
	// releaseDelay recycles Released addresses, so that churn never
	// drains a pool.
	releaseDelay = 5 * time.Second
)

// pools are the driver classes' pools, and every address range of the run.
var pools = map[string][]string{
	retainClass: {"100.64.0.0/27", "2001:db8:c0::/123"},
	deleteClass: {"100.64.1.0/27", "2001:db8:c1::/123"},
}

// staticIP is the i-th static address.
func staticIP(i int) string { return fmt.Sprintf("198.51.100.%d", 10+i) }

// Limits on what lives at once, below the pools' sizes, so that every
// claim of a driver class can be served at quiescence.
const (
	maxClaims       = 12 // of the driver's classes
	maxServices     = 12 // naming claims
	maxStaticClaims = 6
	maxAutoServices = 4
)

// workload is the seeded churn: a tenant creating and deleting claims of
// every class and family, Services attached to them, moved, detached and
// deleted, and plain LoadBalancer Services that auto-claim.
type workload struct {
	s   *system
	rng *rand.Rand
	mu  sync.Mutex
	ops map[string]int
	n   int
}

// setup creates the classes, their pools and the static addresses.
func (w *workload) setup(ctx context.Context) {
	must := func(err error) {
		if err != nil {
			w.s.t.Fatal(err)
		}
	}
	for _, class := range []string{retainClass, deleteClass} {
		must(w.s.admin.Create(ctx, mlb.Pool(class, false, pools[class]...)))
		c := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class},
			Spec: v1alpha1.IPAddressClassSpec{Provisioner: metallb.Provisioner, ReclaimPolicy: v1alpha1.ReclaimRetain,
				ReleaseDelay: &metav1.Duration{Duration: releaseDelay},
				Parameters:   &apiruntime.RawExtension{Raw: fmt.Appendf(nil, `{"pool":%q}`, class)}}}
		if class == deleteClass {
			c.Spec.ReclaimPolicy, c.Spec.ReleaseDelay = v1alpha1.ReclaimDelete, nil
			c.Annotations = map[string]string{v1alpha1.AnnotationAutoClaimClass: "true"}
		}
		must(w.s.admin.Create(ctx, c))
	}
	must(w.s.admin.Create(ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: staticClass},
		Spec: v1alpha1.IPAddressClassSpec{Provisioner: staticProvisioner, ReclaimPolicy: v1alpha1.ReclaimRetain,
			ReleaseDelay: &metav1.Duration{Duration: releaseDelay}}}))
	for i := range staticAddresses {
		name, _ := v1alpha1.IPAddressName(staticIP(i))
		must(w.s.admin.Create(ctx, &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.IPAddressSpec{Address: staticIP(i), ClassName: staticClass, ReclaimPolicy: v1alpha1.ReclaimRetain,
				Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}}}))
	}
}

// poolPrefixes are every address range the run hands out.
func poolPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, ranges := range pools {
		for _, r := range ranges {
			out = append(out, netip.MustParsePrefix(r))
		}
	}
	return out
}

// run churns until ctx ends: an operation every 100-400 ms.
func (w *workload) run(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(time.Duration(100+w.rng.IntN(300)) * time.Millisecond)
		var claims v1alpha1.IPAddressClaimList
		var svcs corev1.ServiceList
		if w.s.tenant.List(ctx, &claims, client.InNamespace(tenantNS)) != nil || w.s.tenant.List(ctx, &svcs, client.InNamespace(tenantNS)) != nil {
			continue
		}
		w.step(ctx, sortClaims(claims.Items), sortServices(svcs.Items))
	}
}

// step picks one operation the current state allows and carries it out.
func (w *workload) step(ctx context.Context, claims map[string][]v1alpha1.IPAddressClaim, svcs map[string][]corev1.Service) {
	driven := append(append([]v1alpha1.IPAddressClaim{}, claims[retainClass]...), claims[deleteClass]...)
	switch op := w.rng.IntN(10); {
	case op == 0 && len(driven) < maxClaims:
		class := []string{retainClass, deleteClass}[w.rng.IntN(2)]
		families := []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6, v1alpha1.Dual}
		w.do("create claim", w.s.tenant.Create(ctx, w.claim(class, families[w.rng.IntN(3)])))
	case op == 1 && len(driven) > maxClaims/2:
		w.do("delete claim", w.s.tenant.Delete(ctx, &driven[w.rng.IntN(len(driven))]))
	case op == 2 && len(driven) > 0 && len(svcs["named"]) < maxServices:
		cl := driven[w.rng.IntN(len(driven))]
		w.do("create Service", w.s.tenant.Create(ctx, w.service("s", map[string]string{
			v1alpha1.AnnotationIPAddressClaim: cl.Name, v1alpha1.AnnotationAutoClaim: "false"})))
	case op == 3 && len(svcs["named"]) > 0 && len(driven) > 0:
		svc, cl := svcs["named"][w.rng.IntN(len(svcs["named"]))], driven[w.rng.IntN(len(driven))]
		w.do("move Service", w.annotate(ctx, &svc, fmt.Sprintf("%q", cl.Name)))
	case op == 4 && len(svcs["named"]) > 0:
		svc := svcs["named"][w.rng.IntN(len(svcs["named"]))]
		w.do("detach Service", w.annotate(ctx, &svc, "null"))
	case op == 5 && len(svcs["named"]) > maxServices/3:
		w.do("delete Service", w.s.tenant.Delete(ctx, &svcs["named"][w.rng.IntN(len(svcs["named"]))]))
	case op == 6 && len(claims[staticClass]) < maxStaticClaims:
		w.do("create static claim", w.s.tenant.Create(ctx, w.claim(staticClass, v1alpha1.IPv4)))
	case op == 7 && len(claims[staticClass]) > maxStaticClaims/2:
		w.do("delete static claim", w.s.tenant.Delete(ctx, &claims[staticClass][w.rng.IntN(len(claims[staticClass]))]))
	case op == 8 && len(svcs["auto"]) < maxAutoServices:
		w.do("create auto-claimed Service", w.s.tenant.Create(ctx, w.service("a", nil)))
	case op == 9 && len(svcs["auto"]) > 0:
		w.do("delete auto-claimed Service", w.s.tenant.Delete(ctx, &svcs["auto"][w.rng.IntN(len(svcs["auto"]))]))
	}
}

func (w *workload) claim(class string, family v1alpha1.IPFamily) *v1alpha1.IPAddressClaim {
	w.n++
	return &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: fmt.Sprintf("c%d", w.n)},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: class, Family: family}}
}

// service is a LoadBalancer Service named prefix+n of a random family
// policy and port.
func (w *workload) service(prefix string, annotations map[string]string) *corev1.Service {
	w.n++
	policies := []corev1.IPFamilyPolicy{corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack}
	svc := loadBalancer(fmt.Sprintf("%s%d", prefix, w.n), policies[w.rng.IntN(3)], int32(80+w.rng.IntN(3)), annotations)
	if *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack && w.rng.IntN(2) == 0 {
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	}
	return svc
}

// loadBalancer is the tenant's LoadBalancer Service name, of family
// policy, on port: every Service the chaos run and the sweep create.
func loadBalancer(name string, policy corev1.IPFamilyPolicy, port int32, annotations map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilyPolicy: &policy, Ports: []corev1.ServicePort{{Port: port}}}}
}

// annotate sets (or, with null, removes) the Service's claim annotation
// with a merge patch, as kubectl annotate does.
func (w *workload) annotate(ctx context.Context, svc *corev1.Service, value string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, v1alpha1.AnnotationIPAddressClaim, value)
	return w.s.tenant.Patch(ctx, svc, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// do counts an operation, and a refused one by the reason the API server
// gave (a webhook failing closed is an InternalError).
func (w *workload) do(op string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		reason := string(apierrors.ReasonForError(err))
		if reason == "" {
			reason = "no answer"
		}
		op += " (refused: " + reason + ")"
	}
	w.ops[op]++
}

// sortClaims groups live claims by class.
func sortClaims(items []v1alpha1.IPAddressClaim) map[string][]v1alpha1.IPAddressClaim {
	out := map[string][]v1alpha1.IPAddressClaim{}
	for _, c := range items {
		if c.DeletionTimestamp == nil {
			out[c.Spec.ClassName] = append(out[c.Spec.ClassName], c)
		}
	}
	return out
}

// sortServices groups live Services: "named" are the tenant's naming
// claims (or detached from one), "auto" the plain ones that auto-claim.
func sortServices(items []corev1.Service) map[string][]corev1.Service {
	out := map[string][]corev1.Service{}
	for _, s := range items {
		switch {
		case s.DeletionTimestamp != nil:
		case strings.HasPrefix(s.Name, "a"):
			out["auto"] = append(out["auto"], s)
		default:
			out["named"] = append(out["named"], s)
		}
	}
	return out
}
