package claim

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/recorder"
)

// snapshot is everything one pass decides on. It is gathered from the cache
// by the reconciler; decide reads nothing else.
type snapshot struct {
	claim *v1alpha1.IPAddressClaim
	// addresses holds every address whose claimRef names the claim, and the
	// Available addresses of the claim's class and families (the candidates).
	addresses []v1alpha1.IPAddress
	// class is the claim's class, resolved once per pass (newSnapshot).
	class resolution
	// quota says why a ResourceQuota has no room for the families the
	// claim still needs (the pass's charge); "" when it has.
	quota string
	// line is, per family the claim waits for, its place among the claims
	// waiting for that family of its class (queue).
	line map[v1alpha1.IPFamily]place
	// detaching names, per family, the address the class keeps for the
	// claim's name that its driver is still detaching from its former
	// Service: the claim waits for it.
	detaching map[v1alpha1.IPFamily]string
	// named is the address spec.addressName names, as the cache shows it;
	// nil when there is none (or the claim names none).
	named *v1alpha1.IPAddress
	now   time.Time
}

// newSnapshot resolves the claim's class among classes.
func newSnapshot(claim *v1alpha1.IPAddressClaim, addresses []v1alpha1.IPAddress, classes []v1alpha1.IPAddressClass, now time.Time) snapshot {
	return snapshot{claim: claim, addresses: addresses, class: resolveClass(claim, classes), now: now}
}

// plan is what one pass writes, in order: claim metadata, address specs,
// address statuses, address deletions, claim status, events.
type plan struct {
	addFinalizer    bool
	removeFinalizer bool
	// provisioner is the stamp to write; nil leaves the annotation alone.
	provisioner *string
	// bind holds addresses whose claimRef the pass writes (set, accepted,
	// or cleared for an excess binding), as they should be stored.
	bind []*v1alpha1.IPAddress
	// release holds addresses whose status the pass writes (reclaim: Released).
	release []*v1alpha1.IPAddress
	// remove holds addresses the pass deletes (reclaim: Delete).
	remove []*v1alpha1.IPAddress
	// status is the claim status to write; nil when unchanged.
	status *v1alpha1.IPAddressClaimStatus
	events []recorder.Event // on transitions only
	// boundNow: the claim became Bound in this pass.
	boundNow bool
	// recheck asks for another pass after it (a deferred first status).
	recheck time.Duration
}

// provisionGrace is how long a new claim of a driver's class may wait for
// its driver before its status says so: the driver usually provisions
// within moments, and a first status of Pending (WaitingForProvisioning)
// would be superseded by Bound at once — a write for nothing, per claim.
// readyGrace is the longer wait granted when the driver reported the class
// Ready: it is up and serving the class, and a burst of a thousand claims
// queues behind it for seconds (p99 14 s on two cores in make bench), each
// of which would otherwise be written Pending first. A deferred claim is
// not yet in its class's line, and nothing of the class wakes it: it is
// looked at again every graceRecheck, so a class found exhausted meanwhile
// puts it in line (ClassExhausted) within moments, not at the grace's end.
const (
	provisionGrace = 3 * time.Second
	readyGrace     = 20 * time.Second
	graceRecheck   = 2 * time.Second
)

// deferFirstWait leaves out a new claim's first status while it only
// waits for its driver, within the grace of its creation; the pass after
// the grace writes it if the driver has not answered by then.
func (p *plan) deferFirstWait(s snapshot, wait waiting) {
	if p.status == nil || wait.reason != v1alpha1.ReasonWaitingForProvisioning || wait.lasting || s.claim.Status.Phase != "" || len(p.events) > 0 {
		return
	}
	if s.claim.Spec.ClassName == "" {
		return // its driver learns the class it resolved to from this status (status.className)
	}
	grace := provisionGrace
	if class := s.class.class; class != nil && meta.IsStatusConditionTrue(class.Status.Conditions, v1alpha1.ConditionReady) {
		grace = readyGrace
	}
	if age := s.now.Sub(s.claim.CreationTimestamp.Time); age >= 0 && age < grace {
		p.status, p.recheck = nil, min(grace-age, graceRecheck)
	}
}

// decide runs contract §4 (or §6 for a claim being deleted) over s.
func decide(s snapshot) plan {
	if s.claim.DeletionTimestamp != nil {
		return decideReclaim(s) // [§6]
	}
	var p plan
	claim := s.claim
	p.addFinalizer = !controllerutil.ContainsFinalizer(claim, v1alpha1.FinalizerClaimProtection) // [4-2]

	bound, preBound := collect(s)         // [4-3]
	bound = p.releaseExcess(claim, bound) // [4-3 excess]
	held := families(bound)

	var res *resolution
	if len(preBound) > 0 || len(binding.MissingFamilies(claim, held)) > 0 {
		res = &s.class // [4-6]
	}
	accepted := p.acceptPreBindings(claim, res, preBound, held) // [4-4]
	bound = append(bound, accepted...)
	held = families(bound)
	missing := binding.MissingFamilies(claim, held) // [4-5]
	if res != nil && res.class != nil && (len(missing) > 0 || len(accepted) > 0) {
		p.stamp(claim, res.class) // [4-6]: also when accepted pre-bindings alone complete it
	}
	var wait waiting
	switch {
	case res == nil || res.class == nil:
	case s.quota != "" && len(missing) > 0:
		// The quota refuses the families that need room; one the claim
		// takes back from its namespace needs none (charge), and is matched
		// still: waiting would leave it to another claim, or to its
		// releaseDelay.
		matched, _ := p.match(s, res.class, takenBack(s, res.class, missing))
		bound = append(bound, matched...)
		wait = waiting{reason: v1alpha1.ReasonQuotaExceeded, message: s.quota}
		p.events = append(p.events, recorder.WarningOnce(claim, v1alpha1.ReasonQuotaExceeded, "%s", s.quota))
	default:
		var matched []v1alpha1.IPAddress
		matched, wait = p.match(s, res.class, missing) // [4-7]
		bound = append(bound, matched...)
	}
	if res == nil && claim.Status.ClassName == "" {
		res = unrecorded(s.class, bound) // [4-8]
	}
	p.setStatus(s, bound, res, wait) // [4-8]
	p.deferFirstWait(s, wait)
	return p
}

// unrecorded is the resolution of a claim its driver bound before any
// status of it was written (the pass that resolved its class deferred its
// first status): status.className is still to be recorded. It is recorded
// only when it is the class every bound address is of — a class deleted or
// a default moved since says nothing of this binding, and a bound claim is
// never put in doubt by its class.
func unrecorded(r resolution, bound []v1alpha1.IPAddress) *resolution {
	if r.class == nil || len(bound) == 0 {
		return nil
	}
	for i := range bound {
		if bound[i].Spec.ClassName != r.class.Name {
			return nil
		}
	}
	return &r
}

// collect returns the addresses bound to the claim (claimRef with its UID)
// and those pre-bound to it (claimRef with no UID). A claimRef with another
// UID is a stale binding to an earlier claim of the same name: never
// collected.
func collect(s snapshot) (bound, preBound []v1alpha1.IPAddress) {
	for _, a := range s.addresses {
		switch {
		case binding.Holds(&a, s.claim):
			bound = append(bound, a)
		case binding.PreBound(&a, s.claim):
			preBound = append(preBound, a)
		}
	}
	binding.SortByName(bound)
	binding.SortByName(preBound)
	return bound, preBound
}

// releaseExcess keeps one bound address per family the claim asks for —
// the one the claim already reports, else the smallest name — and clears
// the claimRef of the rest, and of an address it does not ask for. A claim ends up with two only when two binders raced on stale
// caches; the address it reported is the one a workload may already use.
func (p *plan) releaseExcess(claim *v1alpha1.IPAddressClaim, bound []v1alpha1.IPAddress) []v1alpha1.IPAddress {
	reported := func(a v1alpha1.IPAddress) bool {
		return slices.ContainsFunc(claim.Status.Addresses, func(c v1alpha1.ClaimedAddress) bool { return c.Name == a.Name })
	}
	sort.SliceStable(bound, func(i, j int) bool { return reported(bound[i]) && !reported(bound[j]) })
	var kept []v1alpha1.IPAddress
	seen := map[v1alpha1.IPFamily]bool{}
	for _, a := range bound {
		f := binding.Family(&a)
		if why := unasked(claim, &a); why != "" {
			// Bound by a binder that read the claim before its tenant
			// re-targeted it (the webhook lets a claim holding nothing
			// change): the claim asks for it no more, and its fields are
			// frozen now that it holds an address.
			other := a.DeepCopy()
			other.Spec.ClaimRef = nil
			p.bind = append(p.bind, other)
			p.events = append(p.events, recorder.WarningOnce(claim, v1alpha1.ReasonExcessBindingReleased,
				"released %s (%s): %s", a.Name, a.Spec.Address, why))
			continue
		}
		if !seen[f] {
			seen[f] = true
			kept = append(kept, a)
			continue
		}
		excess := a.DeepCopy()
		excess.Spec.ClaimRef = nil
		p.bind = append(p.bind, excess)
		p.events = append(p.events, recorder.WarningOnce(claim, v1alpha1.ReasonExcessBindingReleased,
			"released %s (%s): the claim already holds an %s address", a.Name, a.Spec.Address, f))
	}
	binding.SortByName(kept)
	return kept
}

// unasked says why claim does not ask for address a bound to it: a family
// it does not request, or a class other than the one it names; "" when it
// does.
func unasked(claim *v1alpha1.IPAddressClaim, a *v1alpha1.IPAddress) string {
	if f := binding.Family(a); !slices.Contains(claim.Spec.Family.Families(), f) {
		return fmt.Sprintf("the claim asks for %s, not an %s address", strings.Join(familyNames(claim.Spec.Family.Families()), " and "), f)
	}
	if c := claim.Spec.ClassName; c != "" && a.Spec.ClassName != c {
		return fmt.Sprintf("the claim asks for class %q, and the address is of class %q", c, a.Spec.ClassName)
	}
	return ""
}

func familyNames(fs []v1alpha1.IPFamily) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return out
}

func families(addrs []v1alpha1.IPAddress) map[v1alpha1.IPFamily]bool {
	held := map[v1alpha1.IPFamily]bool{}
	for i := range addrs {
		held[binding.Family(&addrs[i])] = true
	}
	return held
}

// acceptPreBindings writes the claim's UID into pre-bindings of its class,
// of a requested family it does not hold yet; it refuses the rest with an
// event. Without a resolved class nothing is judged yet.
func (p *plan) acceptPreBindings(claim *v1alpha1.IPAddressClaim, res *resolution, preBound []v1alpha1.IPAddress, held map[v1alpha1.IPFamily]bool) []v1alpha1.IPAddress {
	if len(preBound) == 0 || res == nil || res.class == nil {
		return nil
	}
	var accepted []v1alpha1.IPAddress
	for _, a := range preBound {
		f := binding.Family(&a)
		var why string
		switch {
		case a.Spec.ClassName != res.class.Name:
			why = fmt.Sprintf("it is of class %q, the claim of %q", a.Spec.ClassName, res.class.Name)
		case !slices.Contains(claim.Spec.Family.Families(), f):
			why = fmt.Sprintf("the claim does not request %s", familyText(f))
		case held[f]:
			why = fmt.Sprintf("the claim already holds an %s address", f)
		}
		if why != "" {
			p.events = append(p.events, recorder.WarningOnce(claim, v1alpha1.ReasonPreBindingRefused,
				"refused the pre-binding of %s (%s): %s", a.Name, a.Spec.Address, why))
			continue
		}
		// A copy: the snapshot's ClaimRef is the cache's.
		ref := *a.Spec.ClaimRef
		ref.UID = claim.UID
		a.Spec.ClaimRef = &ref
		p.bind = append(p.bind, a.DeepCopy())
		accepted = append(accepted, a)
		held[f] = true
	}
	return accepted
}

func familyText(f v1alpha1.IPFamily) string {
	if f == "" {
		return "an invalid address"
	}
	return string(f)
}

// stamp mirrors the resolved class's provisioner onto the claim: the
// driver's watch key.
func (p *plan) stamp(claim *v1alpha1.IPAddressClaim, class *v1alpha1.IPAddressClass) {
	if claim.Annotations[v1alpha1.AnnotationProvisioner] != class.Spec.Provisioner {
		p.provisioner = &class.Spec.Provisioner
	}
}

// waiting is why a claim with a resolved class waits: the Bound
// condition's reason and message ("" reason: it does not wait).
type waiting struct {
	reason, message string
	// lasting: nothing the driver does soon ends the wait (a family its
	// range has none of), so the status is not deferred to spare a write.
	lasting bool
}

// match binds, per missing family, the candidate with the smallest name:
// spec.addressName if set, otherwise any Available address of the class and
// family. It returns the addresses bound and, when some family found no
// candidate, why the claim waits.
func (p *plan) match(s snapshot, class *v1alpha1.IPAddressClass, missing []v1alpha1.IPFamily) (matched []v1alpha1.IPAddress, wait waiting) {
	claim := s.claim
	var waitingFor []string
	for _, f := range missing {
		picked := pick(s.addresses, claim, class, f)
		if picked != nil && picked.Spec.ClaimRef == nil && !s.line[f].served() {
			picked = nil // an older claim is first in line for it
		}
		if picked == nil {
			waitingFor = append(waitingFor, string(f))
			continue
		}
		a := picked.DeepCopy()
		a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
		p.bind = append(p.bind, a)
		matched = append(matched, *a)
	}
	switch {
	case len(waitingFor) == 0:
	case claim.Spec.AddressName != "":
		wait = waiting{reason: v1alpha1.ReasonWaitingForAddress, message: namedWait(claim, s.named, class, waitingFor)}
	default:
		wait = whyWaiting(s, class, waitingFor)
	}
	return matched, wait
}

// namedWait says why a claim naming its address (spec.addressName) waits
// for it: no such address, one another namespace holds, one it can never
// bind (another class or family), one bound to another claim, or one not
// Available yet. Of an address another namespace holds it says nothing
// more: tenants share pools, and a claim naming any address must not tell
// whose it is, its phase or its class.
func namedWait(claim *v1alpha1.IPAddressClaim, a *v1alpha1.IPAddress, class *v1alpha1.IPAddressClass, families []string) string {
	name, want := claim.Spec.AddressName, strings.Join(families, " and ")
	switch {
	case a != nil && a.Spec.ClaimRef != nil && a.Spec.ClaimRef.Namespace != claim.Namespace:
		return fmt.Sprintf("IPAddress %s is reserved outside this namespace; spec.addressName binds only an Available address", name)
	case a == nil:
		return fmt.Sprintf("waiting for IPAddress %s, which does not exist; spec.addressName names an IPAddress object, "+
			"ip- followed by its IP with each . or : written as - and 0 appended to a trailing - (ip-2001-db8--0 for 2001:db8::)", name)
	case a.Spec.ClassName != class.Name:
		return fmt.Sprintf("IPAddress %s is of class %q, and the claim asks for class %q: it never binds it", name, a.Spec.ClassName, class.Name)
	case !slices.Contains(families, string(binding.Family(a))):
		return fmt.Sprintf("IPAddress %s is %s, and the claim asks for %s: it never binds it", name, binding.Family(a), want)
	case a.Spec.ClaimRef != nil && !binding.Names(a, claim):
		return fmt.Sprintf("waiting for IPAddress %s, whose claimRef names IPAddressClaim %s/%s (%s)", name, a.Spec.ClaimRef.Namespace, a.Spec.ClaimRef.Name, a.Status.Phase)
	case a.Spec.ClaimRef != nil && a.Spec.ClaimRef.UID != "" && a.Spec.ClaimRef.UID != claim.UID:
		// A claim re-created under its name (restored) names the address
		// its predecessor held: the same name, an older UID.
		return earlierClaimsAddress(a, class)
	}
	return fmt.Sprintf("waiting for IPAddress %s to be Available in class %q as %s", name, class.Name, want)
}

// earlierClaimsAddress explains a claim waiting for the address an earlier
// claim of its name held (a claim restored, or re-created at once).
func earlierClaimsAddress(a *v1alpha1.IPAddress, class *v1alpha1.IPAddressClass) string {
	msg := fmt.Sprintf("waiting for IPAddress %s, which an earlier IPAddressClaim of this name (uid %s) held and which is %s", a.Name, a.Spec.ClaimRef.UID, a.Status.Phase)
	switch {
	case a.DeletionTimestamp != nil || a.Status.Phase == v1alpha1.AddressBound || a.Status.Phase == v1alpha1.AddressPending || a.Status.Phase == "":
		return msg + ", being released or deleted"
	case a.Status.Phase != v1alpha1.AddressReleased:
		// Conflict or Lost: its driver's, until an administrator clears it.
		return msg + ": it is Available again once an administrator clears its spec.claimRef"
	case class.Spec.KeepReleasedInNamespace:
		return msg + fmt.Sprintf(": class %q keeps it for this namespace, and a claim without spec.addressName takes it back; "+
			"this one binds it once an administrator clears its spec.claimRef", class.Name)
	case class.Spec.ReleaseDelay != nil && a.Annotations[v1alpha1.AnnotationHeld] != "true":
		return msg + fmt.Sprintf(": it is Available again %s after its release, or once an administrator clears its spec.claimRef", class.Spec.ReleaseDelay.Duration)
	}
	return msg + ": it is Available again once an administrator clears its spec.claimRef"
}

// whyWaiting explains a claim waiting for families of class with no
// candidate: its driver refuses the class (PoolRefused), the class has none
// left or older claims are ahead in line (ClassExhausted, with the claim's
// place), or the driver is to provision one (WaitingForProvisioning).
func whyWaiting(s snapshot, class *v1alpha1.IPAddressClass, families []string) waiting {
	if c := meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		return waiting{reason: v1alpha1.ReasonPoolRefused, message: fmt.Sprintf("waiting for provisioner %s, which refuses class %q (%s: %s)",
			class.Spec.Provisioner, class.Name, c.Reason, c.Message)}
	}
	for _, f := range families {
		if name := s.detaching[v1alpha1.IPFamily(f)]; name != "" {
			return waiting{reason: v1alpha1.ReasonWaitingForAddress, message: fmt.Sprintf("waiting for IPAddress %s, which class %q keeps for claims named %s, to be detached from its former Service",
				name, class.Name, s.claim.Name)}
		}
	}
	for _, f := range families {
		if pl := s.line[v1alpha1.IPFamily(f)]; outOfAddresses(class, v1alpha1.IPFamily(f), pl) {
			w := waiting{reason: v1alpha1.ReasonClassExhausted, message: fmt.Sprintf("%s: no %s address is left to bind", standing(pl.ahead, f, class.Name), f)}
			if len(rangeless(class, []string{f})) > 0 {
				// Its addresses of f are all taken (some Lost, say, their
				// range removed from the pool): the way out is the range's.
				w.message += ", and the range its provisioner counts has none (status.capacity): one is provisioned once the range has one"
				w.lasting = true
			}
			return w
		}
	}
	w := waiting{reason: v1alpha1.ReasonWaitingForProvisioning,
		message: fmt.Sprintf("waiting for provisioner %s to provision %s in class %q", class.Spec.Provisioner, strings.Join(families, " and "), class.Name)}
	if uncounted := rangeless(class, families); len(uncounted) > 0 {
		w.message += fmt.Sprintf(", whose range it counts has no %s address (status.capacity): one is provisioned once the range has one", strings.Join(uncounted, " or "))
		w.lasting = true
	}
	return w
}

// rangeless are the families of families that class's driver counts no
// range of while it counts one of another: a pool of one family asked for
// the other, which nothing provisions until an administrator adds a range.
func rangeless(class *v1alpha1.IPAddressClass, families []string) []string {
	if len(class.Status.Capacity) == 0 {
		return nil
	}
	var out []string
	for _, f := range families {
		if _, _, ok := binding.DriverCapacity(class, v1alpha1.IPFamily(f)); !ok {
			out = append(out, f)
		}
	}
	return out
}

// outOfAddresses reports whether a claim at place pl waits because its
// class has no address of f left for it. Where the driver counts its range
// (status.capacity), that is fewer left than the claims ahead and this one:
// claims in line behind a driver with room are only waiting for it to
// provision. Otherwise, from the class's own addresses: none left, or the
// Available ones go to older claims. A class with no address of f at all
// is not exhausted: its claims wait for a driver, however many there are.
func outOfAddresses(class *v1alpha1.IPAddressClass, f v1alpha1.IPFamily, pl place) bool {
	if _, _, ok := binding.DriverCapacity(class, f); ok {
		left, total, _ := binding.Left(class, f)
		return total > 0 && left <= int64(pl.ahead)
	}
	if _, total, known := binding.Left(class, f); !known || total == 0 {
		return false
	}
	return binding.Exhausted(class, f) || !pl.served()
}

// place is a claim's place in the line for a family of its class: ahead
// older claims wait for it, and available Available addresses are left
// (counted up to ahead+1, -1 when not counted: nobody is ahead).
type place struct{ ahead, available int }

// served reports whether the claim's turn has come: nobody is ahead, or
// enough addresses are left for those ahead and for it.
func (p place) served() bool { return p.ahead == 0 || p.available > p.ahead }

// exactPlaces is how far back in line a claim's place is given exactly.
// Further back it is given by its order of magnitude: an exact place
// changes for every claim behind whenever the line moves, and rewriting
// them all would cost N²/2 status writes to drain a line of N.
const exactPlaces = 10

// standing is where a claim with ahead older claims before it stands in
// the line for family f of class: "3rd waiting for IPv4 in class public",
// or "waiting for IPv4 in class public behind 100 or more older claims".
func standing(ahead int, f, class string) string {
	if ahead < exactPlaces {
		return fmt.Sprintf("%s waiting for %s in class %s", ordinal(ahead+1), f, class)
	}
	floor := exactPlaces
	for floor*10 <= ahead {
		floor *= 10
	}
	return fmt.Sprintf("waiting for %s in class %s behind %d or more older claims", f, class, floor)
}

// ordinal is n as "1st", "2nd", "3rd", "4th", "11th" …
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// pick is the candidate a claim binds for family f: one its class keeps
// for it in its namespace (rebindable, in releasedFirst order), else the
// Available one with the smallest name — spec.addressName's when the claim
// names one (which never takes a kept address). nil when there is none.
func pick(candidates []v1alpha1.IPAddress, claim *v1alpha1.IPAddressClaim, class *v1alpha1.IPAddressClass, f v1alpha1.IPFamily) *v1alpha1.IPAddress {
	var kept, free []v1alpha1.IPAddress
	for i := range candidates {
		a := &candidates[i]
		switch {
		case claim.Spec.AddressName == "" && rebindable(a, claim, class, f):
			kept = append(kept, *a)
		case matchable(a, class.Name, f) && (claim.Spec.AddressName == "" || a.Name == claim.Spec.AddressName):
			free = append(free, *a)
		}
	}
	if len(kept) > 0 {
		a := slices.MinFunc(kept, releasedFirst(claim))
		return &a
	}
	if len(free) > 0 {
		a := slices.MinFunc(free, func(a, b v1alpha1.IPAddress) int { return strings.Compare(a.Name, b.Name) })
		return &a
	}
	return nil
}

// free: phase Available (so accepted by the address reconciler), no
// claimRef, not being deleted.
func free(a *v1alpha1.IPAddress) bool {
	return a.Status.Phase == v1alpha1.AddressAvailable && a.Spec.ClaimRef == nil && a.DeletionTimestamp == nil
}

// matchable: free, of the class and family.
func matchable(a *v1alpha1.IPAddress, class string, f v1alpha1.IPFamily) bool {
	return free(a) && a.Spec.ClassName == class && binding.Family(a) == f
}

// rebindable: an address of family f that class keeps in the claim's
// namespace (KeepReleasedInNamespace) — Released, last bound to another
// claim of that namespace — and that its driver has taken back from every
// workload: bound again while its old Service still held it, it would be
// handed between two Services at once.
func rebindable(a *v1alpha1.IPAddress, claim *v1alpha1.IPAddressClaim, class *v1alpha1.IPAddressClass, f v1alpha1.IPFamily) bool {
	return kept(a, claim, class, f) && a.Status.AssociatedTo == nil && a.Status.Holding == nil
}

// takenBack are the families of missing the claim can take back from its
// namespace now: a kept address of the family is among the snapshot's.
func takenBack(s snapshot, class *v1alpha1.IPAddressClass, missing []v1alpha1.IPFamily) []v1alpha1.IPFamily {
	return slices.DeleteFunc(slices.Clone(missing), func(f v1alpha1.IPFamily) bool {
		return !slices.ContainsFunc(s.addresses, func(a v1alpha1.IPAddress) bool { return rebindable(&a, s.claim, class, f) })
	})
}

// detaching: an address of family f the class keeps for a claim of this
// claim's name, still attached to its old Service. The claim waits for it
// (keptFreed wakes it) instead of matching an Available address: a claim
// deleted and created again under its name, its Service naming it still,
// gets its address back, not another.
func detaching(a *v1alpha1.IPAddress, claim *v1alpha1.IPAddressClaim, class *v1alpha1.IPAddressClass, f v1alpha1.IPFamily) bool {
	return kept(a, claim, class, f) && a.Spec.ClaimRef.Name == claim.Name && (a.Status.AssociatedTo != nil || a.Status.Holding != nil)
}

// kept: a Released address of family f that class keeps in the claim's
// namespace, last bound to another claim (incarnation) of it.
func kept(a *v1alpha1.IPAddress, claim *v1alpha1.IPAddressClaim, class *v1alpha1.IPAddressClass, f v1alpha1.IPFamily) bool {
	ref := a.Spec.ClaimRef
	return class.Spec.KeepReleasedInNamespace && a.Status.Phase == v1alpha1.AddressReleased && a.DeletionTimestamp == nil &&
		ref != nil && ref.Namespace == claim.Namespace && ref.UID != claim.UID &&
		a.Spec.ClassName == class.Name && binding.Family(a) == f
}

// releasedFirst orders the addresses a claim may take back: the one last
// bound to a claim of its name first, then the one released longest ago
// (its Bound condition's lastTransitionTime), then by name.
func releasedFirst(claim *v1alpha1.IPAddressClaim) func(a, b v1alpha1.IPAddress) int {
	return func(a, b v1alpha1.IPAddress) int {
		if na, nb := a.Spec.ClaimRef.Name == claim.Name, b.Spec.ClaimRef.Name == claim.Name; na != nb {
			if na {
				return -1
			}
			return 1
		}
		if c := releasedAt(&a).Compare(releasedAt(&b)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	}
}

func releasedAt(a *v1alpha1.IPAddress) time.Time {
	if c := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionBound); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// setStatus recomputes the claim status from the bound addresses and records
// the transitions worth an event.
func (p *plan) setStatus(s snapshot, bound []v1alpha1.IPAddress, res *resolution, wait waiting) {
	claim := s.claim
	status := claim.Status.DeepCopy()
	status.Addresses = nil
	binding.SortByName(bound)
	var lost []string
	for _, a := range bound {
		status.Addresses = append(status.Addresses, v1alpha1.ClaimedAddress{Name: a.Name, Address: a.Spec.Address})
		if a.Status.Phase == v1alpha1.AddressLost {
			lost = append(lost, a.Name)
		}
	}
	if res != nil {
		if res.class != nil {
			status.ClassName = res.class.Name
		}
		binding.SetCondition(&status.Conditions, res.condition(), s.now)
		if old := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionClassResolved); res.class == nil && (old == nil || old.Reason != res.reason) {
			p.events = append(p.events, recorder.Warning(claim, res.reason, "%s", res.message))
		}
	}

	allHeld := len(binding.MissingFamilies(claim, families(bound))) == 0
	cond := metav1.Condition{Type: v1alpha1.ConditionBound, Status: metav1.ConditionFalse}
	switch {
	case allHeld && len(lost) == 0:
		status.Phase = v1alpha1.ClaimBound
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, v1alpha1.ReasonBound, "bound to "+addressList(status.Addresses)
	case claim.Status.Phase == v1alpha1.ClaimBound || claim.Status.Phase == v1alpha1.ClaimLost:
		status.Phase = v1alpha1.ClaimLost
		cond.Reason = lostReason(wait)
		cond.Message = lostMessage(claim, bound, lost, res, wait)
	case allHeld:
		// Never bound, every family held, one Lost (a pre-binding accepted
		// of an address its provisioner no longer holds): it waits for
		// that address, whatever else the pass resolved.
		status.Phase = v1alpha1.ClaimPending
		cond.Reason = v1alpha1.ReasonWaitingForAddress
		cond.Message = fmt.Sprintf("waiting for IPAddress %s, which its provisioner no longer holds (Lost), to be held again", strings.Join(lost, " and "))
	default:
		status.Phase = v1alpha1.ClaimPending
		cond.Reason, cond.Message = pendingReason(res, wait)
		if len(lost) > 0 { // never Bound: its Lost address is told beside the wait of the family it lacks
			cond.Message += fmt.Sprintf("; IPAddress %s, which its provisioner no longer holds (Lost), waits to be held again", strings.Join(lost, " and "))
		}
	}
	binding.SetCondition(&status.Conditions, cond, s.now)

	switch {
	case status.Phase == v1alpha1.ClaimLost && claim.Status.Phase != v1alpha1.ClaimLost:
		p.events = append(p.events, recorder.Warning(claim, v1alpha1.ReasonLost, "%s", cond.Message))
	case status.Phase == v1alpha1.ClaimBound && claim.Status.Phase == v1alpha1.ClaimLost && slices.Equal(claim.Status.Addresses, status.Addresses):
		p.events = append(p.events, recorder.Normal(claim, v1alpha1.ReasonBound, "binding restored: %s", cond.Message))
	case status.Phase == v1alpha1.ClaimBound && claim.Status.Phase == v1alpha1.ClaimLost:
		p.events = append(p.events, recorder.Normal(claim, v1alpha1.ReasonBound, "bound again, to a new address in place of the one gone: %s", cond.Message))
	}
	p.boundNow = status.Phase == v1alpha1.ClaimBound && claim.Status.Phase != v1alpha1.ClaimBound
	if !statusEqual(&claim.Status, status) {
		p.status = status
	}
}

// pendingReason is the Bound condition of a Pending claim: its class has
// yet to resolve, or it waits for an address (wait).
func pendingReason(res *resolution, wait waiting) (reason, message string) {
	if res != nil && res.class != nil {
		return wait.reason, wait.message
	}
	msg := "waiting for the claim's class to resolve"
	if res != nil {
		msg += ": " + res.message
	}
	return v1alpha1.ReasonWaitingForClass, msg
}

// lostReason is the Bound condition's reason on a Lost claim: Lost, or
// QuotaExceeded when its quota refuses the replacement — as on a Pending
// claim, so that it stands in no line (a place it cannot take would be
// kept from every other tenant's claims).
func lostReason(wait waiting) string {
	if wait.reason == v1alpha1.ReasonQuotaExceeded {
		return v1alpha1.ReasonQuotaExceeded
	}
	return v1alpha1.ReasonLost
}

// lostMessage says what a Lost claim lost and what comes next; a family
// gone that its class cannot replace (res: it does not resolve) or its
// quota refuses to (wait) says so.
func lostMessage(claim *v1alpha1.IPAddressClaim, bound []v1alpha1.IPAddress, lost []string, res *resolution, wait waiting) string {
	var parts []string
	if len(lost) > 0 {
		parts = append(parts, "address "+strings.Join(lost, ", ")+" is Lost")
	}
	next := "another is bound in its place once one is free or provisioned"
	switch {
	case res != nil && res.class == nil:
		next = "another is bound in its place once its class resolves (" + res.message + ")"
	case wait.reason == v1alpha1.ReasonQuotaExceeded:
		next = "another is bound in its place once its quota has room (" + wait.message + ")"
	case wait.lasting || wait.reason == v1alpha1.ReasonPoolRefused:
		next = "none can be bound in its place for now: " + wait.message
	}
	for _, f := range binding.MissingFamilies(claim, families(bound)) {
		parts = append(parts, "the "+string(f)+" address is gone; "+next)
	}
	if len(lost) > 0 {
		parts = append(parts, "a Lost address is not replaced: it may come back to the backend, or an admin deletes it")
	}
	return strings.Join(parts, "; ")
}

func addressList(addrs []v1alpha1.ClaimedAddress) string {
	parts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		parts = append(parts, fmt.Sprintf("%s (%s)", a.Name, a.Address))
	}
	return strings.Join(parts, ", ")
}

func statusEqual(a, b *v1alpha1.IPAddressClaimStatus) bool {
	return a.Phase == b.Phase && a.ClassName == b.ClassName &&
		slices.Equal(a.Addresses, b.Addresses) && conditionsEqual(a.Conditions, b.Conditions)
}

func conditionsEqual(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message &&
			x.LastTransitionTime.Equal(&y.LastTransitionTime)
	})
}

// unsure reports whether plan p takes from the claim what a lagging cache
// may show wrongly: it turns the claim Lost or drops an address its status
// reports, or it releases an excess binding (which of two bindings to keep
// is read from the claim's status — two binders on caches of different
// ages each released the other's). Such a plan is decided again on what
// the API server shows. So is every plan that lets a deleted claim go: an
// address its driver created a moment ago, not yet in the cache, would
// outlive the claim and fall to its own reclaimPolicy instead of the
// claim's reclaim (an auto-claim's addresses go whatever their policy).
func unsure(claim *v1alpha1.IPAddressClaim, p plan) bool {
	if p.removeFinalizer || p.status != nil && degrades(claim.Status, *p.status) {
		return true
	}
	return slices.ContainsFunc(p.bind, func(a *v1alpha1.IPAddress) bool { return a.Spec.ClaimRef == nil })
}

// degrades reports whether status after turns the claim Lost or drops an
// address before reports: what a pass must not decide on a lagging cache.
func degrades(before, after v1alpha1.IPAddressClaimStatus) bool {
	if after.Phase == v1alpha1.ClaimLost && before.Phase != v1alpha1.ClaimLost {
		return true
	}
	return slices.ContainsFunc(before.Addresses, func(a v1alpha1.ClaimedAddress) bool { return !slices.Contains(after.Addresses, a) })
}
