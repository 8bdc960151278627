package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
)

// What -scale (make bench-scale) creates besides the static phases.
const (
	scaleServiceNamespace = "bench-services"
	scaleAttachNamespace  = driverClaimNamespace
)

// scaleSizes are -scale's sizes: a /16 of static claims, plain
// LoadBalancer Services, claims of a MetalLB class and how many of them
// Services attach.
type scaleSizes struct {
	static, services, driver, attached int
}

// scaleResults are -scale's figures, phase by phase.
type scaleResults struct {
	sizes        scaleSizes
	base, static *staticResults
	services     phaseMemory
	servicesTook time.Duration
	driver       *driverResults
	attachTook   time.Duration
	attached     phaseMemory
}

// phaseMemory is both controllers' memory after a phase.
type phaseMemory struct{ manager, driver memory }

// measureScale runs -scale: N static claims (the baseline), then a /16 of
// them, then plain LoadBalancer Services, then claims of a MetalLB class
// and Services attached to part of them; the controllers' memory after
// each phase.
func (b *bench) measureScale(ctx context.Context, sz scaleSizes) (*scaleResults, error) {
	res := &scaleResults{sizes: sz}
	var err error
	if res.base, err = b.measureStatic(ctx, staticPhase{n: b.opts.n, class: className, namespace: claimNamespace, first: firstIP}); err != nil {
		return nil, err
	}
	ph := staticPhase{n: sz.static, class: className + "-scale", namespace: claimNamespace + "-scale", first: largeFirstIP}
	if res.static, err = b.measureStatic(ctx, ph); err != nil {
		return nil, err
	}
	if res.servicesTook, err = b.plainServices(ctx, sz.services); err != nil {
		return nil, err
	}
	res.services = phaseMemory{manager: b.memory(ctx, b.manager)}
	say("%d LoadBalancer Services in %s; manager %s", sz.services, res.servicesTook.Round(time.Millisecond), res.services.manager)
	if res.driver, err = b.measureDriver(ctx, sz.driver, false); err != nil {
		return nil, err
	}
	if res.attachTook, err = b.attach(ctx, sz.attached); err != nil {
		return nil, err
	}
	res.attached = phaseMemory{manager: b.memory(ctx, b.manager), driver: b.memory(ctx, b.driver)}
	b.profile(ctx, b.manager, "heap?gc=1", "scale-heap")
	b.profile(ctx, b.driver, "heap?gc=1", "scale-heap")
	return res, nil
}

// plainServices creates n LoadBalancer Services nobody serves (no class
// auto-claims them, no pool assigns them): the Services of a cluster the
// controllers watch and cache.
func (b *bench) plainServices(ctx context.Context, n int) (time.Duration, error) {
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleServiceNamespace}}); err != nil {
		return 0, err
	}
	say("creating %d LoadBalancer Services", n)
	return b.createAll(ctx, n, func(ctx context.Context, i int) error {
		return b.c.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: scaleServiceNamespace, Name: fmt.Sprintf("svc-%05d", i),
				Labels: map[string]string{"app.kubernetes.io/name": "bench"}},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeLoadBalancer,
				// Another load balancer's: MetalLB leaves them alone, the
				// controllers still watch and cache them.
				LoadBalancerClass:             ptr.To("bench.example.com/elsewhere"),
				AllocateLoadBalancerNodePorts: ptr.To(false),
				Selector:                      map[string]string{"app": fmt.Sprintf("app-%05d", i)},
				Ports:                         []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
			},
		})
	})
}

// attach creates n Services, each naming one of the driver path's claims,
// and waits until MetalLB gives each its claim's address.
func (b *bench) attach(ctx context.Context, n int) (time.Duration, error) {
	want := map[string]string{}
	var claims v1alpha1.IPAddressClaimList
	if err := b.c.List(ctx, &claims, client.InNamespace(scaleAttachNamespace)); err != nil {
		return 0, err
	}
	for _, c := range claims.Items {
		if len(c.Status.Addresses) > 0 {
			want[c.Name] = c.Status.Addresses[0].Address
		}
	}
	attached, err := track(ctx, b.c, "Services attached", func() client.ObjectList { return &corev1.ServiceList{} },
		[]client.ListOption{client.InNamespace(scaleAttachNamespace)}, n, func(o client.Object) bool {
			svc := o.(*corev1.Service)
			ips := metallb.IngressIPs(svc)
			return len(ips) == 1 && ips[0].String() == want[svc.Annotations[v1alpha1.AnnotationIPAddressClaim]]
		})
	if err != nil {
		return 0, err
	}
	defer attached.Close()
	say("attaching %d Services to claims of class %s", n, driverClassName)
	start := time.Now()
	if _, err := b.createAll(ctx, n, func(ctx context.Context, i int) error {
		return b.c.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: scaleAttachNamespace, Name: fmt.Sprintf("web-%05d", i),
				Annotations: map[string]string{v1alpha1.AnnotationIPAddressClaim: claimName(i)}},
			Spec: corev1.ServiceSpec{
				Type:                          corev1.ServiceTypeLoadBalancer,
				IPFamilyPolicy:                ptr.To(corev1.IPFamilyPolicySingleStack),
				IPFamilies:                    []corev1.IPFamily{corev1.IPv4Protocol},
				AllocateLoadBalancerNodePorts: ptr.To(false),
				Selector:                      map[string]string{"app": fmt.Sprintf("web-%05d", i)},
				Ports:                         []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
			},
		})
	}); err != nil {
		return 0, fmt.Errorf("creating attached Services: %w", err)
	}
	if err := attached.wait(ctx, b.opts.timeout); err != nil {
		return 0, err
	}
	took := time.Since(start)
	say("%d Services attached in %s", n, took.Round(time.Millisecond))
	return took, nil
}

func (r *scaleResults) print(w io.Writer, opts options, limits memoryLimit) {
	sz := r.sizes
	fmt.Fprintf(w, "\nbench-scale: %d CPUs (%s/%s%s), %s; shipped defaults; the controllers' Go memory limit as in a pod limited to %s\n\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.Version(), limits)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, value, goal string) { fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, value, goal) }
	row("figure", "measured", "target")
	grow := r.static.perClaim().Seconds() / r.base.perClaim().Seconds()
	row(fmt.Sprintf("static binds, N = %d", r.base.n), fmt.Sprintf("%.0f/s, %s per claim", float64(r.base.n)/r.base.bindElapsed.Seconds(),
		r.base.perClaim().Round(time.Microsecond)), "—")
	row(fmt.Sprintf("static binds, N = %d", r.static.n), fmt.Sprintf("%.0f/s, %s per claim = %.2f × N = %d's",
		float64(r.static.n)/r.static.bindElapsed.Seconds(), r.static.perClaim().Round(time.Microsecond), grow, r.base.n),
		target(grow <= targetGrowth, fmt.Sprintf("≤ %.1f ×", targetGrowth)))
	if name, value := floorRow(r.base, r.static); name != "" {
		row(name, value, "— (context)")
	}
	row(fmt.Sprintf("manager after %d + %d static claims", r.base.n, r.static.n), r.static.memory.String(), limits.target("manager", r.static.memory))
	row(fmt.Sprintf("manager after %d plain LoadBalancer Services", sz.services), r.services.manager.String(), limits.target("manager", r.services.manager))
	d := r.driver
	row(fmt.Sprintf("driver path: %d claims Bound / held", d.n), fmt.Sprintf("%s / %s", d.boundElapsed.Round(100*time.Millisecond),
		d.heldElapsed.Round(100*time.Millisecond)), "—")
	// Read (and the peaks reset) at the end of the driver path: their
	// peaks are that phase's, which the rows at the end do not include.
	row("manager after the driver path", d.managerMemory.String(), limits.target("manager", d.managerMemory))
	row("metallb-iad after the driver path", d.driverMemory.String(), limits.target("metallb-iad", d.driverMemory))
	row(fmt.Sprintf("%d Services attached", sz.attached), r.attachTook.Round(100*time.Millisecond).String(), "—")
	row("manager at the end", r.attached.manager.String(), limits.target("manager", r.attached.manager))
	row("metallb-iad at the end", r.attached.driver.String(), limits.target("metallb-iad", r.attached.driver))
	_ = tw.Flush()
	fmt.Fprintln(w)
}
