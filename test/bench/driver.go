package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"net/netip"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	testmetallb "github.com/cozystack/address-controller/test/metallb"
)

// The driver path is measured against MetalLB's own speed: the floor is N
// Services pinned straight to MetalLB, the least any driver built on
// MetalLB's books can take for N addresses. Claims should be Bound well
// before that (the driver binds first and holds after) and held not much
// after it.
const (
	targetBoundOfFloor         = 0.5
	targetHeldOfFloor          = 1.1
	targetDriverWritesPerClaim = 5.0
)

// What the driver path creates. The two pools are disjoint, so the floor's
// Services never count as taken addresses of the driver's pool.
const (
	floorNamespace       = "bench-floor"
	floorPool            = "bench-floor"
	floorFirstIP         = "100.72.0.0"
	driverPool           = "bench-driver"
	driverFirstIP        = "100.80.0.0"
	driverClassName      = "bench-metallb"
	driverClaimNamespace = "bench-driver-claims"
	// driverNamespace is where metallb-iad keeps its placeholders.
	driverNamespace = "metallb-iad-system"
	// gonePoll is how often a wait for deleted Services lists them.
	gonePoll = 250 * time.Millisecond
	// driverSettleMax bounds the wait for the writes to stop. MetalLB
	// writes a Service's status a second time long after the first (some
	// 45 s at N=1000, its client limited to 20 requests/s), and those
	// writes belong to the figures.
	driverSettleMax = 2 * time.Minute
)

// driverResults are the driver path's figures.
type driverResults struct {
	// n is how many claims (and floor Services).
	n int
	// poolBits is the prefix length of both pools.
	poolBits int
	// The floor: N pinned Services assigned by MetalLB.
	floorElapsed, floorCreateTime time.Duration
	floorTimes                    []time.Duration
	floorWrites                   requests
	// floorAPIServerCPU is kube-apiserver's CPU seconds over the floor;
	// negative when unknown.
	floorAPIServerCPU float64
	// driverReady runs from the driver's start to its class being Ready.
	driverReady time.Duration
	// boundElapsed and heldElapsed run from the first claim create to the
	// last claim seen Bound and the last placeholder seen held.
	boundElapsed, heldElapsed time.Duration
	createTime                time.Duration
	timeToBound, timeToHeld   []time.Duration
	writes                    requests
	agents                    auditCounts
	// CPU seconds over the claim phase; negative when unknown.
	apiServerCPU, managerCPU, driverCPU, metallbCPU float64
	// The controllers' memory after the claims.
	managerMemory, driverMemory memory
	// anomalies are what the run saw that it should not have.
	anomalies []string
}

// measureDriver starts MetalLB's controller, measures the floor (unless
// withFloor is false), then starts metallb-iad and measures n claims of a
// MetalLB class.
func (b *bench) measureDriver(ctx context.Context, n int, withFloor bool) (*driverResults, error) {
	res := &driverResults{n: n, poolBits: poolBits(n)}
	say("driver path: MetalLB floor, then metallb-iad")
	for _, ns := range []string{floorNamespace, driverClaimNamespace} {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	metallbProc, err := b.startMetalLB(ctx)
	if err != nil {
		return nil, err
	}
	for name, first := range map[string]string{floorPool: floorFirstIP, driverPool: driverFirstIP} {
		// Pools that hand out only pinned addresses, as the driver requires.
		prefix := netip.PrefixFrom(netip.MustParseAddr(first), res.poolBits).Masked()
		if err := b.c.Create(ctx, testmetallb.Pool(name, false, prefix.String())); err != nil {
			return nil, err
		}
	}
	if err := b.warmUpMetalLB(ctx, n); err != nil {
		return nil, fmt.Errorf("%w%s", err, metallbProc.describe())
	}
	if withFloor {
		if err := b.floor(ctx, res); err != nil {
			return nil, fmt.Errorf("%w%s", err, metallbProc.describe())
		}
	}
	driver, err := b.startDriver(ctx, res)
	if err != nil {
		return nil, err
	}
	b.driver = driver
	if err := b.driverClaims(ctx, res, driver, metallbProc); err != nil {
		return nil, fmt.Errorf("%w%s%s", err, driver.describe(), metallbProc.where())
	}
	return res, nil
}

// poolBits is the prefix length of both pools: four times N addresses
// rounded up to a power of two, so that neither the allocator nor MetalLB
// works near a full pool (a /20 for N=1000, a /14 at most).
func poolBits(n int) int {
	return 32 - bits.Len(uint(4*n-1))
}

// startMetalLB starts MetalLB's controller the way the playground does.
func (b *bench) startMetalLB(ctx context.Context) (*child, error) {
	c, out, err := b.procs.output(testmetallb.Binary)
	if err != nil {
		return nil, err
	}
	p, err := testmetallb.Run(ctx, b.cp, b.binDir, b.tmp, out)
	if err != nil {
		return nil, err
	}
	b.procs.started(c, p)
	return c, nil
}

// warmUpMetalLB pins one Service to the floor pool's last address (outside
// the N the floor uses) and waits for MetalLB to assign it: then MetalLB has
// synced and loaded both pools, and the floor measures assignment only.
func (b *bench) warmUpMetalLB(ctx context.Context, n int) error {
	ip := lastAddr(netip.PrefixFrom(netip.MustParseAddr(floorFirstIP), poolBits(n)))
	probe := pinnedService(floorNamespace, "warm-up", floorPool, ip)
	t, err := track(ctx, b.c, "warm-up Service assigned", func() client.ObjectList { return &corev1.ServiceList{} },
		[]client.ListOption{client.InNamespace(floorNamespace)}, 1, assignedPin)
	if err != nil {
		return err
	}
	defer t.Close()
	start := time.Now()
	if err := b.c.Create(ctx, probe); err != nil {
		return err
	}
	if err := t.wait(ctx, b.opts.timeout); err != nil {
		return err
	}
	say("MetalLB assigned its first Service %s after it was created", time.Since(start).Round(time.Millisecond))
	if err := b.c.Delete(ctx, probe); err != nil {
		return err
	}
	return b.waitGone(ctx, floorNamespace)
}

// lastAddr is the last address of an IPv4 prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// pinnedService is a LoadBalancer Service shaped like the driver's
// placeholders (single-stack, one port, no node ports, opted out of
// auto-claim), pinned to ip of pool: what MetalLB alone does with it is
// the floor of what the driver can do.
func pinnedService(namespace, name, pool string, ip netip.Addr) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: map[string]string{
			metallb.AnnotationLoadBalancerIPs: ip.String(),
			metallb.AnnotationAddressPool:     pool,
			v1alpha1.AnnotationAutoClaim:      "false",
		}},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			IPFamilyPolicy:                ptr.To(corev1.IPFamilyPolicySingleStack),
			IPFamilies:                    []corev1.IPFamily{corev1.IPv4Protocol},
			AllocateLoadBalancerNodePorts: ptr.To(false),
			Ports:                         []corev1.ServicePort{{Name: "hold", Protocol: corev1.ProtocolTCP, Port: 65535}},
		},
	}
}

// assignedPin reports whether MetalLB assigned a Service the address its
// loadBalancerIPs annotation pins: for a placeholder, that the address is
// held in MetalLB's books.
func assignedPin(o client.Object) bool {
	svc := o.(*corev1.Service)
	ip, err := netip.ParseAddr(svc.Annotations[metallb.AnnotationLoadBalancerIPs])
	return err == nil && metallb.Holds(svc, ip)
}

// driverWrites sums the rows that move while MetalLB and the controllers
// work: this API group, events, Services, the ClusterIPs kube-apiserver
// allocates them (networking.k8s.io IPAddresses) and MetalLB's resources.
func driverWrites(r requests) float64 {
	var t float64
	for k, c := range r {
		switch {
		case k.group == v1alpha1.GroupVersion.Group, k.group == metallb.PoolGVK.Group, k.group == "networking.k8s.io",
			k.resource == "events", k.resource == "services":
			t += c.total()
		}
	}
	return t
}

// settled waits until the writes driverWrites counts stop moving. Writes
// that never stop are a write loop: an anomaly to report, not a reason to
// fail the run.
func (b *bench) settled(ctx context.Context, res *driverResults, when string) (snapshot, error) {
	snap, ok, err := b.settledSnapshotOf(ctx, driverWrites, driverSettleMax)
	if err == nil && !ok {
		res.anomalies = append(res.anomalies, fmt.Sprintf("writes still moving %s after %s of waiting", when, driverSettleMax))
	}
	return snap, err
}

// floor creates N pinned Services, waits until MetalLB assigned each its
// address, and deletes them again so that they weigh on nothing after.
func (b *bench) floor(ctx context.Context, res *driverResults) error {
	n := res.n
	before, err := b.settled(ctx, res, "before the floor")
	if err != nil {
		return err
	}
	assigned, err := track(ctx, b.c, "floor Services assigned", func() client.ObjectList { return &corev1.ServiceList{} },
		[]client.ListOption{client.InNamespace(floorNamespace)}, n, assignedPin)
	if err != nil {
		return err
	}
	defer assigned.Close()

	say("MetalLB floor: creating %d pinned LoadBalancer Services with %d workers", n, b.opts.workers)
	apiProfiled := make(chan struct{})
	go func() {
		defer close(apiProfiled)
		// The first seconds, where the driver path falls behind the
		// floor: set beside the driver claims' profile of the same span.
		b.profileAPIServer(ctx, heldProfileSeconds, "floor-cpu")
	}()
	defer func() { <-apiProfiled }()
	ips := addressesFrom(floorFirstIP, n)
	created := make([]time.Time, n)
	res.floorCreateTime, err = b.createAll(ctx, n, func(ctx context.Context, i int) error {
		created[i] = time.Now()
		return b.c.Create(ctx, pinnedService(floorNamespace, floorServiceName(i), floorPool, ips[i]))
	})
	if err != nil {
		return fmt.Errorf("creating floor Services: %w", err)
	}
	if err := assigned.wait(ctx, b.opts.timeout); err != nil {
		return err
	}
	if res.floorElapsed, res.floorTimes, err = spans(created, assigned.times(), floorServiceName); err != nil {
		return err
	}
	say("MetalLB assigned %d Services in %s", n, res.floorElapsed.Round(time.Millisecond))
	after, err := b.settled(ctx, res, "after the floor")
	if err != nil {
		return err
	}
	res.floorWrites = after.writes.since(before.writes)
	res.floorAPIServerCPU = cpuDelta(before.cpu, after.cpu)

	say("deleting the floor's Services")
	if _, err := b.createAll(ctx, n, func(ctx context.Context, i int) error {
		return b.c.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: floorNamespace, Name: floorServiceName(i)}})
	}); err != nil {
		return fmt.Errorf("deleting floor Services: %w", err)
	}
	return b.waitGone(ctx, floorNamespace)
}

// heldProfileSeconds is how long the API server is profiled from the first
// create of the floor and of the driver claims, with -pprof.
const heldProfileSeconds = 15

func floorServiceName(i int) string { return fmt.Sprintf("lb-%05d", i) }

// addressesFrom is n consecutive addresses from first.
func addressesFrom(first string, n int) []netip.Addr {
	ips := make([]netip.Addr, n)
	ip := netip.MustParseAddr(first)
	for i := range ips {
		ips[i] = ip
		ip = ip.Next()
	}
	return ips
}

// waitGone polls until no Service is left in namespace: a one-off wait,
// not worth a watch.
func (b *bench) waitGone(ctx context.Context, namespace string) error {
	deadline := time.Now().Add(b.opts.timeout)
	for {
		var l corev1.ServiceList
		if err := b.c.List(ctx, &l, client.InNamespace(namespace)); err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d Services still in %s after %s", len(l.Items), namespace, b.opts.timeout)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(gonePoll):
		}
	}
}

// startDriver starts bin/metallb-iad the way the playground does (without
// leader election, metrics or probes, and with client-side rate limiting
// off like the manager), creates the MetalLB class and waits until the
// driver reports it Ready.
func (b *bench) startDriver(ctx context.Context, res *driverResults) (*child, error) {
	ready, err := track(ctx, b.c, "class Ready", func() client.ObjectList { return &v1alpha1.IPAddressClassList{} }, nil, 1,
		func(o client.Object) bool {
			class := o.(*v1alpha1.IPAddressClass)
			return class.Name == driverClassName && meta.IsStatusConditionTrue(class.Status.Conditions, "Ready")
		})
	if err != nil {
		return nil, err
	}
	defer ready.Close()
	args := b.driverArgs(b.shipped, testmetallb.Namespace)
	start := time.Now()
	driver, err := b.procs.start("metallb-iad", filepath.Join(b.root, "bin", "metallb-iad"), args, b.limits.env("metallb-iad"))
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(metallb.Parameters{Pool: driverPool})
	if err != nil {
		return nil, err
	}
	class := &v1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: driverClassName},
		Spec: v1alpha1.IPAddressClassSpec{
			Provisioner: metallb.Provisioner, ReclaimPolicy: v1alpha1.ReclaimRetain,
			Parameters: &kruntime.RawExtension{Raw: params},
		},
	}
	if err := b.c.Create(ctx, class); err != nil {
		return nil, err
	}
	if err := ready.wait(ctx, b.opts.timeout); err != nil {
		return nil, fmt.Errorf("%w%s", err, driver.describe())
	}
	res.driverReady = time.Since(start)
	say("class %s Ready %s after metallb-iad started", driverClassName, res.driverReady.Round(time.Millisecond))
	return driver, nil
}

// driverClaims creates N claims of the MetalLB class and waits until every
// one is Bound and every address the driver provisioned for them is held
// by its placeholder in MetalLB's books.
func (b *bench) driverClaims(ctx context.Context, res *driverResults, driver, metallbProc *child) error {
	n := res.n
	before, err := b.settled(ctx, res, "before the claims")
	if err != nil {
		return err
	}
	managerCPU, driverCPU, metallbCPU := processCPU(b.manager.pid()), processCPU(driver.pid()), processCPU(metallbProc.pid())

	bound, err := track(ctx, b.c, "driver claims Bound",
		func() client.ObjectList { return &v1alpha1.IPAddressClaimList{} },
		[]client.ListOption{client.InNamespace(driverClaimNamespace)}, n,
		func(o client.Object) bool { return o.(*v1alpha1.IPAddressClaim).Status.Phase == v1alpha1.ClaimBound })
	if err != nil {
		return err
	}
	defer bound.Close()
	held, err := track(ctx, b.c, "placeholders held", func() client.ObjectList { return &corev1.ServiceList{} },
		[]client.ListOption{client.InNamespace(driverNamespace), client.HasLabels{metallb.LabelAddress}}, n, assignedPin)
	if err != nil {
		return err
	}
	defer held.Close()

	say("creating %d claims of class %s with %d workers", n, driverClassName, b.opts.workers)
	profiled := make(chan struct{})
	go func() {
		defer close(profiled)
		b.profile(ctx, driver, "profile?seconds=20", "driver-cpu")
	}()
	defer func() { <-profiled }()
	apiProfiled := make(chan struct{})
	go func() {
		defer close(apiProfiled)
		b.profileAPIServer(ctx, heldProfileSeconds, "driver-cpu")
	}()
	defer func() { <-apiProfiled }()
	created, took, err := b.createClaims(ctx, n, driverClaimNamespace, driverClassName)
	if err != nil {
		return fmt.Errorf("creating driver claims: %w", err)
	}
	res.createTime = took
	say("created %d claims in %s; waiting for them to be Bound and held", n, res.createTime.Round(time.Millisecond))
	if err := bound.wait(ctx, b.opts.timeout); err != nil {
		return err
	}
	if err := held.wait(ctx, b.opts.timeout); err != nil {
		return err
	}
	if res.boundElapsed, res.timeToBound, err = spans(created, bound.times(), claimName); err != nil {
		return err
	}
	if err := b.heldSpans(ctx, res, created, held.times()); err != nil {
		return err
	}

	after, err := b.settled(ctx, res, "after the claims")
	if err != nil {
		return err
	}
	res.writes = after.writes.since(before.writes)
	if res.agents, err = readAudit(b.auditPath, before.audit, after.audit); err != nil {
		return err
	}
	res.apiServerCPU = cpuDelta(before.cpu, after.cpu)
	res.managerCPU = cpuDelta(managerCPU, processCPU(b.manager.pid()))
	res.driverCPU = cpuDelta(driverCPU, processCPU(driver.pid()))
	res.metallbCPU = cpuDelta(metallbCPU, processCPU(metallbProc.pid()))
	res.managerMemory, res.driverMemory = b.memory(ctx, b.manager), b.memory(ctx, driver)
	b.profile(ctx, driver, "heap?gc=1", "driver-heap")
	return nil
}

// heldSpans dates each claim's hold by the placeholder of the address
// bound to it, and checks what the counts alone would not show: one
// address per claim, each held at its own IP.
func (b *bench) heldSpans(ctx context.Context, res *driverResults, created []time.Time, heldAt map[string]time.Time) error {
	var addrs v1alpha1.IPAddressList
	if err := b.c.List(ctx, &addrs); err != nil {
		return err
	}
	var placeholders corev1.ServiceList
	if err := b.c.List(ctx, &placeholders, client.InNamespace(driverNamespace)); err != nil {
		return err
	}
	pinned := map[string]string{}
	for _, svc := range placeholders.Items {
		pinned[svc.Name] = svc.Annotations[metallb.AnnotationLoadBalancerIPs]
	}
	byClaim := map[string][]string{}
	for _, a := range addrs.Items {
		if a.Spec.ClassName != driverClassName {
			continue
		}
		if a.Spec.ClaimRef == nil {
			res.anomalies = append(res.anomalies, fmt.Sprintf("address %s (%s) of the class is bound to no claim", a.Name, a.Spec.Address))
			continue
		}
		byClaim[a.Spec.ClaimRef.Name] = append(byClaim[a.Spec.ClaimRef.Name], a.Name)
		if pinned[a.Name] != a.Spec.Address {
			res.anomalies = append(res.anomalies, fmt.Sprintf("address %s (%s): placeholder pins %q", a.Name, a.Spec.Address, pinned[a.Name]))
		}
	}
	at := map[string]time.Time{}
	for claim, names := range byClaim {
		if len(names) != 1 {
			res.anomalies = append(res.anomalies, fmt.Sprintf("claim %s has %d addresses of the class: %v", claim, len(names), names))
		}
		if t, ok := heldAt[names[0]]; ok {
			at[claim] = t
		}
	}
	var err error
	res.heldElapsed, res.timeToHeld, err = spans(created, at, claimName)
	return err
}

// spans is the time from the first create to the last object seen done,
// and each object's time from its create to done, sorted; an object never
// seen done is an error.
func spans(created []time.Time, done map[string]time.Time, name func(int) string) (time.Duration, []time.Duration, error) {
	first := slices.MinFunc(created, time.Time.Compare)
	var last time.Time
	each := make([]time.Duration, 0, len(created))
	for i, c := range created {
		at, ok := done[name(i)]
		if !ok {
			return 0, nil, fmt.Errorf("%s was never seen done", name(i))
		}
		if at.After(last) {
			last = at
		}
		each = append(each, at.Sub(c))
	}
	slices.Sort(each)
	return last.Sub(first), each, nil
}

func (r *driverResults) print(w io.Writer, opts options) {
	n := float64(r.n)
	floor := r.floorElapsed.Seconds()
	boundOfFloor, heldOfFloor := r.boundElapsed.Seconds()/floor, r.heldElapsed.Seconds()/floor
	total := r.writes.total()
	system := total - n
	floorTotal := r.floorWrites.total()

	fmt.Fprintf(w, "\nmetallb-iad driver path: N=%d, %d workers; MetalLB pools /%d, autoAssign: false; class Ready %s after the driver started\n\n",
		r.n, opts.workers, r.poolBits, r.driverReady.Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, value, note string) { fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, value, note) }
	row("MetalLB floor: all Services assigned", r.floorElapsed.Round(time.Millisecond).String(),
		fmt.Sprintf("%d pinned LoadBalancer Services, first create to last assigned (creates took %s)", r.n, r.floorCreateTime.Round(time.Millisecond)))
	row("MetalLB floor: time to assigned p50", percentile(r.floorTimes, 0.50).Round(time.Millisecond).String(),
		"p99 "+percentile(r.floorTimes, 0.99).Round(time.Millisecond).String())
	row("MetalLB floor: API writes per Service", fmt.Sprintf("%.3f", floorTotal/n),
		fmt.Sprintf("%.3f without the %d creates", (floorTotal-n)/n, r.n))
	row("MetalLB floor: CPU per Service, kube-apiserver", cpuPer(r.floorAPIServerCPU, n),
		"its process_cpu_seconds_total over the floor: the API server's share of MetalLB's own work")
	row("driver: all claims Bound", r.boundElapsed.Round(time.Millisecond).String(),
		fmt.Sprintf("%.2f × floor; %s (creates took %s)", boundOfFloor,
			target(boundOfFloor <= targetBoundOfFloor, fmt.Sprintf("target ≤ %.1f × floor", targetBoundOfFloor)), r.createTime.Round(time.Millisecond)))
	row("driver: all reservations held", r.heldElapsed.Round(time.Millisecond).String(),
		fmt.Sprintf("%.2f × floor; %s", heldOfFloor, target(heldOfFloor <= targetHeldOfFloor, fmt.Sprintf("target ≤ %.1f × floor", targetHeldOfFloor))))
	row("driver: time to Bound p50", percentile(r.timeToBound, 0.50).Round(time.Millisecond).String(),
		"p99 "+percentile(r.timeToBound, 0.99).Round(time.Millisecond).String()+", from the create request to the watch seeing Bound")
	row("driver: time to held p50", percentile(r.timeToHeld, 0.50).Round(time.Millisecond).String(),
		"p99 "+percentile(r.timeToHeld, 0.99).Round(time.Millisecond).String()+", to the claim's placeholder seen with its IP in status")
	row("API writes per claim, all", fmt.Sprintf("%.3f", total/n),
		fmt.Sprintf("%.0f mutating requests: the %d claim creates, the controllers', MetalLB's, events", total, r.n))
	// The writes target counts the core's and the driver's writes
	// only; the summary judges it. This row is the whole load.
	row("API writes per claim, without the creates", fmt.Sprintf("%.3f", system/n),
		"MetalLB's, the API server's own and events included (the target counts the core's and the driver's: see the summary)")
	row("CPU per claim, kube-apiserver", cpuPer(r.apiServerCPU, n),
		"its process_cpu_seconds_total over the claim phase: the floor's work for the placeholders and the binding's on the same cores")
	row("CPU per claim, manager", cpuPer(r.managerCPU, n), "from /proc over the claim phase")
	row("CPU per claim, metallb-iad", cpuPer(r.driverCPU, n), "from /proc over the claim phase")
	row("CPU per claim, metallb-controller", cpuPer(r.metallbCPU, n), "from /proc over the claim phase")
	_ = tw.Flush()

	fmt.Fprintf(w, "\nmutating requests while provisioning (kube-apiserver apiserver_request_total; every client):\n")
	printRequests(w, r.writes, n, "ipaddressclaims")
	printAgents(w, r.agents, n, total)
	if len(r.anomalies) > 0 {
		fmt.Fprintf(w, "\nanomalies (%d):\n", len(r.anomalies))
		for i, a := range r.anomalies {
			if i == 20 {
				fmt.Fprintf(w, "  … and %d more\n", len(r.anomalies)-i)
				break
			}
			fmt.Fprintf(w, "  %s\n", a)
		}
	}
	fmt.Fprintln(w)
}

// printRequests prints the breakdown by resource and verb, marking the
// plain creates of created as the bench's.
func printRequests(w io.Writer, writes requests, n float64, created string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  resource\tverb\trequests\tper claim\tnon-2xx\t\n")
	for _, k := range writes.sorted() {
		c := writes[k]
		note := ""
		if k.resource == created && k.subresource == "" && k.verb == "POST" {
			note = "(the benchmark's creates)"
		}
		fmt.Fprintf(tw, "  %s\t%-5s\t%8.0f\t%9.2f\t%7.0f\t%s\n", k, k.verb, c.total(), c.total()/n, c.failed, note)
	}
	_ = tw.Flush()
}

// printAgents prints the same writes by client, from the audit log; its
// total differs from the metric's only by requests at the window's edges.
func printAgents(w io.Writer, agents auditCounts, n, metricTotal float64) {
	fmt.Fprintf(w, "\nthe same by client (kube-apiserver audit log, user agent up to the first \"/\"; %.0f requests):\n", agents.total())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  agent\tresource\tverb\trequests\tper claim\tnon-2xx\t\n")
	byAgent := agents.byAgent()
	prev := ""
	for _, k := range agents.sorted() {
		if k.agent != prev {
			fmt.Fprintf(tw, "  %s\t(all)\t\t%8.0f\t%9.2f\t\t\n", k.agent, byAgent[k.agent], byAgent[k.agent]/n)
			prev = k.agent
		}
		c := agents[k]
		fmt.Fprintf(tw, "  \t%s\t%-6s\t%8.0f\t%9.2f\t%7.0f\t\n", k.resource, k.verb, c.total(), c.total()/n, c.failed)
	}
	_ = tw.Flush()
	if d := agents.total() - metricTotal; d != 0 {
		fmt.Fprintf(w, "  (%+.0f against apiserver_request_total)\n", d)
	}
}
