package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/cachetrim"
)

var timeToBound = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "address_controller_claim_time_to_bound_seconds",
	Help:    "Time from an IPAddressClaim's creation to its first Bound phase, by class.",
	Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
}, []string{"class"})

var autoClaimsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "address_controller_auto_claims_created_total",
	Help: "IPAddressClaims created for LoadBalancer Services by auto-claim, by class.",
}, []string{"class"})

var (
	autoClaimsDesc = prometheus.NewDesc("address_controller_auto_claims",
		"IPAddressClaims controlled by a Service (auto-claims), by phase and class.", []string{"phase", "class"}, nil)
	claimsDesc = prometheus.NewDesc("address_controller_claims",
		"IPAddressClaims by phase and resolved class.", []string{"phase", "class"}, nil)
	addressesDesc = prometheus.NewDesc("address_controller_addresses",
		"IPAddresses by phase and class.", []string{"phase", "class"}, nil)
	waitingDesc = prometheus.NewDesc("address_controller_claims_waiting",
		"Pending IPAddressClaims by namespace, class and the reason of their Bound condition (ClassExhausted, QuotaExceeded, PoolRefused, WaitingForProvisioning, ...).",
		[]string{"namespace", "class", "reason"}, nil)
	namespaceDesc = prometheus.NewDesc("address_controller_namespace_addresses",
		"IPAddresses whose claimRef names the namespace (Bound, Released and retained, being provisioned): what its address quotas count, by namespace and class, whether a quota limits the class or not.",
		[]string{"namespace", "class"}, nil)
	exhaustedDesc = prometheus.NewDesc("address_controller_class_exhausted",
		"1 while a class has a family with no address left to bind or provision (its Exhausted condition).", []string{"class"}, nil)
	nearlyExhaustedDesc = prometheus.NewDesc("address_controller_class_nearly_exhausted",
		"1 while a class has a family below its NearlyExhausted threshold.", []string{"class"}, nil)
)

var (
	quotaUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "address_controller_quota_used_addresses",
		Help: "Addresses counted against a ResourceQuota's address key (bound, released and retained, being provisioned), by namespace, quota and key.",
	}, []string{"namespace", "quota", "resource"})
	quotaHard = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "address_controller_quota_hard_addresses",
		Help: "The limit of a ResourceQuota's address key, by namespace, quota and key.",
	}, []string{"namespace", "quota", "resource"})
)

// quotaKeys are the address keys each quota's series were last observed
// with, so that a key taken out of a quota loses its series.
var quotaKeys = struct {
	sync.Mutex
	of map[types.NamespacedName][]corev1.ResourceName
}{of: map[types.NamespacedName][]corev1.ResourceName{}}

// ObserveQuota records a quota's usage and limits of its address keys; the
// series of a key the quota no longer has go.
func ObserveQuota(rq *corev1.ResourceQuota, used corev1.ResourceList) {
	quotaKeys.Lock()
	defer quotaKeys.Unlock()
	key := types.NamespacedName{Namespace: rq.Namespace, Name: rq.Name}
	for _, k := range quotaKeys.of[key] {
		if _, ok := used[k]; !ok {
			quotaUsed.DeleteLabelValues(rq.Namespace, rq.Name, string(k))
			quotaHard.DeleteLabelValues(rq.Namespace, rq.Name, string(k))
		}
	}
	keys := make([]corev1.ResourceName, 0, len(used))
	for k, v := range used {
		hard := rq.Spec.Hard[k]
		quotaUsed.WithLabelValues(rq.Namespace, rq.Name, string(k)).Set(float64(v.Value()))
		quotaHard.WithLabelValues(rq.Namespace, rq.Name, string(k)).Set(float64(hard.Value()))
		keys = append(keys, k)
	}
	quotaKeys.of[key] = keys
}

// ForgetQuota drops the series of a quota that is gone or limits no
// addresses any more.
func ForgetQuota(namespace, name string) {
	quotaKeys.Lock()
	defer quotaKeys.Unlock()
	delete(quotaKeys.of, types.NamespacedName{Namespace: namespace, Name: name})
	for _, g := range []*prometheus.GaugeVec{quotaUsed, quotaHard} {
		g.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "quota": name})
	}
}

// ObserveTimeToBound records a claim becoming Bound d after its creation.
func ObserveTimeToBound(class string, d time.Duration) {
	timeToBound.WithLabelValues(class).Observe(d.Seconds())
}

// AutoClaimCreated counts a claim auto-claim created.
func AutoClaimCreated(class string) {
	autoClaimsCreated.WithLabelValues(class).Inc()
}

// Register registers the metrics; reader is the manager's cache.
func Register(reader client.Reader) error {
	for _, c := range []prometheus.Collector{timeToBound, autoClaimsCreated, quotaUsed, quotaHard} {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return err
		}
	}
	return ctrlmetrics.Registry.Register(&inventory{reader: reader})
}

// inventory counts claims and addresses from the cache when scraped,
// walking the cache's objects uncopied: a scrape at a /16 would otherwise
// copy every claim and address.
type inventory struct{ reader client.Reader }

func (i *inventory) Describe(ch chan<- *prometheus.Desc) {
	ch <- claimsDesc
	ch <- addressesDesc
	ch <- waitingDesc
	ch <- namespaceDesc
	ch <- exhaustedDesc
	ch <- nearlyExhaustedDesc
	ch <- autoClaimsDesc
}

func (i *inventory) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type key struct{ phase, class string }
	type waitKey struct{ namespace, class, reason string }
	counts, auto, waiting := map[key]int{}, map[key]int{}, map[waitKey]int{}
	if err := cachetrim.Each(ctx, i.reader, &v1alpha1.IPAddressClaim{}, &v1alpha1.IPAddressClaimList{}, func(c *v1alpha1.IPAddressClaim) {
		k := key{string(c.Status.Phase), c.Status.ClassName}
		counts[k]++
		if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound); cond != nil && waits(c.Status.Phase, cond.Reason) {
			waiting[waitKey{c.Namespace, binding.ClassName(c), cond.Reason}]++
		}
		if ref := metav1.GetControllerOf(c); ref != nil && ref.Kind == "Service" && ref.APIVersion == "v1" &&
			c.Annotations[v1alpha1.AnnotationAutoClaimedFor] == string(ref.UID) {
			auto[k]++
		}
	}); err == nil {
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(claimsDesc, prometheus.GaugeValue, float64(n), k.phase, k.class)
		}
		for k, n := range auto {
			ch <- prometheus.MustNewConstMetric(autoClaimsDesc, prometheus.GaugeValue, float64(n), k.phase, k.class)
		}
		for k, n := range waiting {
			ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(n), k.namespace, k.class, k.reason)
		}
	}
	_ = cachetrim.Each(ctx, i.reader, &v1alpha1.IPAddressClass{}, &v1alpha1.IPAddressClassList{}, func(c *v1alpha1.IPAddressClass) {
		for desc, t := range map[*prometheus.Desc]string{exhaustedDesc: v1alpha1.ConditionExhausted, nearlyExhaustedDesc: v1alpha1.ConditionNearlyExhausted} {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, running(c, t), c.Name)
		}
	})
	type nsKey struct{ namespace, class string }
	addrs, namespaces := map[key]int{}, map[nsKey]int{}
	if err := cachetrim.Each(ctx, i.reader, &v1alpha1.IPAddress{}, &v1alpha1.IPAddressList{}, func(a *v1alpha1.IPAddress) {
		addrs[key{string(a.Status.Phase), a.Spec.ClassName}]++
		if ref := a.Spec.ClaimRef; ref != nil {
			namespaces[nsKey{ref.Namespace, a.Spec.ClassName}]++
		}
	}); err == nil {
		for k, n := range addrs {
			ch <- prometheus.MustNewConstMetric(addressesDesc, prometheus.GaugeValue, float64(n), k.phase, k.class)
		}
		for k, n := range namespaces {
			ch <- prometheus.MustNewConstMetric(namespaceDesc, prometheus.GaugeValue, float64(n), k.namespace, k.class)
		}
	}
}

// running is 1 when class reports condition t (Exhausted, NearlyExhausted)
// and takes claims still: a class being deleted takes none, and its
// status is no longer kept, so its last condition would alert for good.
func running(class *v1alpha1.IPAddressClass, t string) float64 {
	if class.DeletionTimestamp == nil && meta.IsStatusConditionTrue(class.Status.Conditions, t) {
		return 1
	}
	return 0
}

// waits says whether a claim of phase, its Bound condition's reason
// reason, counts among the waiting: a Pending one, and a Lost one waiting
// on something else than its address coming back (its quota refusing the
// replacement) — a Lost one as such has an alert of its own.
func waits(phase v1alpha1.ClaimPhase, reason string) bool {
	return phase == v1alpha1.ClaimPending || phase == v1alpha1.ClaimLost && reason != v1alpha1.ReasonLost
}
