package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
)

// quiescent waits until nothing is left to do — everything as it must be
// (unsettled) and no controller writing for five seconds — and returns how
// long that took; on timeout, what is still wrong.
func (s *system) quiescent(ctx context.Context, limit time.Duration) (time.Duration, []string) {
	start := time.Now()
	var problems []string
	for time.Since(start) < limit && ctx.Err() == nil {
		if problems = s.unsettled(ctx); len(problems) > 0 {
			sleep(ctx, time.Second)
			continue
		}
		before, err := s.writes(ctx)
		sleep(ctx, 5*time.Second)
		after, err2 := s.writes(ctx)
		if err != nil || err2 != nil {
			problems = []string{fmt.Sprint("reading the API server's metrics: ", err, err2)}
			continue
		}
		if d := diff(before, after); len(d) > 0 {
			problems = []string{fmt.Sprintf("still writing: %v", d)}
			continue
		}
		if problems = s.unsettled(ctx); len(problems) == 0 {
			return time.Since(start), nil
		}
	}
	return time.Since(start), problems
}

// diff is what grew from before to after.
func diff(before, after map[string]int) map[string]int {
	d := map[string]int{}
	for k, n := range after {
		if n > before[k] {
			d[k] = n - before[k]
		}
	}
	return d
}

// unsettled lists what is not as it must be once faults and churn have
// stopped: every claim that can be served is Bound; nothing is stuck
// Terminating; every placeholder has its address; MetalLB's books equal
// the ledger — every driver address held by exactly one Service, every
// pool address a Service holds recorded by an IPAddress — and a Service
// that alone names a Bound claim holds its addresses.
func (s *system) unsettled(ctx context.Context) []string {
	var claims v1alpha1.IPAddressClaimList
	var addrs v1alpha1.IPAddressList
	var svcs corev1.ServiceList
	if err := s.admin.List(ctx, &claims); err != nil {
		return []string{err.Error()}
	}
	if err := s.admin.List(ctx, &addrs); err != nil {
		return []string{err.Error()}
	}
	if err := s.admin.List(ctx, &svcs); err != nil {
		return []string{err.Error()}
	}
	var out []string
	out = append(out, claimsSettled(claims.Items)...)
	out = append(out, bindingsSettled(claims.Items, addrs.Items)...)
	out = append(out, booksSettled(addrs.Items, svcs.Items)...)
	out = append(out, attachedSettled(claims.Items, svcs.Items)...)
	return out
}

func claimsSettled(claims []v1alpha1.IPAddressClaim) []string {
	var out []string
	static, staticBound := 0, 0
	for _, c := range claims {
		switch {
		case c.DeletionTimestamp != nil:
			out = append(out, "claim "+c.Namespace+"/"+c.Name+" is stuck Terminating")
		case c.Spec.ClassName == staticClass:
			static++
			if c.Status.Phase == v1alpha1.ClaimBound {
				staticBound++
			}
		case c.Status.Phase != v1alpha1.ClaimBound:
			why := ""
			if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound); cond != nil {
				why = ": " + cond.Reason + " " + cond.Message
			}
			out = append(out, fmt.Sprintf("claim %s/%s is %q%s", c.Namespace, c.Name, c.Status.Phase, why))
		}
	}
	if want := min(static, staticAddresses); staticBound != want {
		out = append(out, fmt.Sprintf("%d of %d static claims are Bound, want %d (%d addresses)", staticBound, static, want, staticAddresses))
	}
	return out
}

// bindingsSettled: every address naming a claim is bound to it, by UID,
// and reported in its status — nothing pre-bound and never accepted (a
// leak: nobody would ever release it).
func bindingsSettled(claims []v1alpha1.IPAddressClaim, addrs []v1alpha1.IPAddress) []string {
	var out []string
	live := map[string]*v1alpha1.IPAddressClaim{}
	for i, c := range claims {
		live[c.Namespace+"/"+c.Name] = &claims[i]
	}
	for _, a := range addrs {
		ref := a.Spec.ClaimRef
		if ref == nil || a.Status.Phase == v1alpha1.AddressReleased {
			continue
		}
		c := live[ref.Namespace+"/"+ref.Name]
		switch {
		case c == nil:
			out = append(out, fmt.Sprintf("address %s (%s) names claim %s/%s, which is gone", a.Name, a.Status.Phase, ref.Namespace, ref.Name))
		case ref.UID != c.UID:
			out = append(out, fmt.Sprintf("address %s (%s) names claim %s/%s by uid %q, the claim's is %q", a.Name, a.Status.Phase, ref.Namespace, ref.Name, ref.UID, c.UID))
		case !slices.ContainsFunc(c.Status.Addresses, func(ca v1alpha1.ClaimedAddress) bool { return ca.Name == a.Name }):
			out = append(out, fmt.Sprintf("address %s (%s) is bound to claim %s/%s, which is %s and reports %v", a.Name, a.Status.Phase, ref.Namespace, ref.Name,
				c.Status.Phase, c.Status.Addresses))
		}
	}
	return out
}

func booksSettled(addrs []v1alpha1.IPAddress, svcs []corev1.Service) []string {
	var out []string
	recorded := map[netip.Addr]*v1alpha1.IPAddress{}
	for i, a := range addrs {
		ip, _ := netip.ParseAddr(a.Spec.Address)
		recorded[ip] = &addrs[i]
		if a.DeletionTimestamp != nil {
			out = append(out, "address "+a.Name+" is stuck Terminating")
		}
		switch a.Status.Phase {
		case v1alpha1.AddressConflict, v1alpha1.AddressLost:
			out = append(out, fmt.Sprintf("address %s is %s", a.Name, a.Status.Phase))
		case v1alpha1.AddressReleased:
			// Every class of the run recycles after releaseDelay.
			out = append(out, fmt.Sprintf("address %s is Released, to be recycled", a.Name))
		}
	}
	holders := map[netip.Addr][]string{}
	for _, svc := range svcs {
		key := svc.Namespace + "/" + svc.Name
		if svc.DeletionTimestamp != nil {
			out = append(out, "Service "+key+" is stuck Terminating")
		}
		if placeholder(&svc) {
			if a := addressNamed(addrs, svc.Labels[metallb.LabelAddress]); a == nil || a.DeletionTimestamp != nil {
				out = append(out, "placeholder "+key+" has no address")
			}
		}
		for _, ip := range metallb.IngressIPs(&svc) {
			holders[ip] = append(holders[ip], key)
			if inPools(ip) && recorded[ip] == nil {
				out = append(out, fmt.Sprintf("Service %s holds %s, which no IPAddress records", key, ip))
			}
		}
	}
	for ip, a := range recorded {
		if a.Spec.ClassName != staticClass && len(holders[ip]) != 1 {
			out = append(out, fmt.Sprintf("address %s is held by %d Services %v, want 1", a.Name, len(holders[ip]), holders[ip]))
		}
	}
	return out
}

// attachedSettled: a Service that alone names a Bound claim of the
// driver's, whose families the claim covers, holds the claim's addresses.
func attachedSettled(claims []v1alpha1.IPAddressClaim, svcs []corev1.Service) []string {
	var out []string
	for _, c := range claims {
		if c.Spec.ClassName == staticClass || c.Status.Phase != v1alpha1.ClaimBound {
			continue
		}
		var naming []corev1.Service
		for _, svc := range svcs {
			if svc.Namespace == c.Namespace && svc.Annotations[v1alpha1.AnnotationIPAddressClaim] == c.Name && svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
				naming = append(naming, svc)
			}
		}
		if len(naming) != 1 {
			continue
		}
		svc := naming[0]
		covered := true
		var want []string
		for _, f := range svc.Spec.IPFamilies {
			if !slices.Contains(c.Spec.Family.Families(), v1alpha1.IPFamily(f)) {
				covered = false
			}
			for _, a := range c.Status.Addresses {
				if v1alpha1.FamilyOf(a.Address) == v1alpha1.IPFamily(f) {
					want = append(want, a.Address)
				}
			}
		}
		var got []string
		for _, ip := range metallb.IngressIPs(&svc) {
			got = append(got, ip.String())
		}
		slices.Sort(want)
		slices.Sort(got)
		if covered && !slices.Equal(want, got) {
			out = append(out, fmt.Sprintf("Service %s/%s alone names Bound claim %s and holds %v, want %v", svc.Namespace, svc.Name, c.Name, got, want))
		}
	}
	return out
}

func addressNamed(addrs []v1alpha1.IPAddress, name string) *v1alpha1.IPAddress {
	for i := range addrs {
		if addrs[i].Name == name {
			return &addrs[i]
		}
	}
	return nil
}

func inPools(ip netip.Addr) bool {
	return slices.ContainsFunc(poolPrefixes(), func(p netip.Prefix) bool { return p.Contains(ip) })
}

// writtenResources are the resources the controllers write; an idle
// system writes none of them.
var writtenResources = []string{"ipaddressclaims", "ipaddresses", "ipaddressclasses", "services", "events"}

// writes are the API server's counts of writes (create, update, patch,
// delete) of writtenResources, by verb and resource, from its metrics.
func (s *system) writes(ctx context.Context) (map[string]int, error) {
	text, err := s.cp.APIServerMetrics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		labels, value, _ := strings.Cut(sc.Text(), "} ")
		labels, ok := strings.CutPrefix(labels, "apiserver_request_total{")
		if !ok {
			continue
		}
		verb, resource := label(labels, "verb"), label(labels, "resource")
		if !slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE"}, verb) || !slices.Contains(writtenResources, resource) {
			continue
		}
		if sub := label(labels, "subresource"); sub != "" {
			resource += "/" + sub
		}
		n, _ := strconv.ParseFloat(value, 64)
		out[verb+" "+resource] += int(n)
	}
	return out, nil
}

// label is the value of name in a Prometheus label set.
func label(labels, name string) string {
	_, rest, ok := strings.Cut(","+labels, ","+name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}
