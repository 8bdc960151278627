package claim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/index"
)

// outcome is the comparable summary of a plan.
type outcome struct {
	addFinalizer, removeFinalizer bool
	stamp                         string
	// bind: "<address> -> <namespace>/<name> <uid>", or "<address> -> none".
	bind          []string
	release       []string
	remove        []string
	phase         v1alpha1.ClaimPhase
	className     string
	addresses     []string
	classResolved string // reason of the ClassResolved condition, "" if absent
	bound         string // reason of the Bound condition
	events        []string
}

func summarize(claim *v1alpha1.IPAddressClaim, p plan) outcome {
	o := outcome{addFinalizer: p.addFinalizer, removeFinalizer: p.removeFinalizer}
	if p.provisioner != nil {
		o.stamp = *p.provisioner
	}
	for _, a := range p.bind {
		if ref := a.Spec.ClaimRef; ref != nil {
			o.bind = append(o.bind, fmt.Sprintf("%s -> %s/%s %s", a.Name, ref.Namespace, ref.Name, ref.UID))
		} else {
			o.bind = append(o.bind, a.Name+" -> none")
		}
	}
	for _, a := range p.release {
		o.release = append(o.release, a.Name+" "+string(a.Status.Phase))
	}
	for _, a := range p.remove {
		o.remove = append(o.remove, a.Name)
	}
	st := claim.Status
	if p.status != nil {
		st = *p.status
	}
	o.phase, o.className = st.Phase, st.ClassName
	for _, a := range st.Addresses {
		o.addresses = append(o.addresses, a.Name)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionClassResolved); c != nil {
		o.classResolved = c.Reason
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionBound); c != nil {
		o.bound = c.Reason
	}
	for _, e := range p.events {
		o.events = append(o.events, e.Type+" "+e.Reason)
	}
	return o
}

// The table mirrors contract §4 (bind) and §6 (reclaim): each name starts
// with the step it tests.
func TestDecide(t *testing.T) {
	public := newClass("public", asDefault)
	private := newClass("private")
	kept := newClass("kept", asDefault, func(c *v1alpha1.IPAddressClass) { c.Spec.KeepReleasedInNamespace = true })
	claim := newClaim("web")
	dual := newClaim("web", withFamily(v1alpha1.Dual))
	tests := []struct {
		name      string
		claim     *v1alpha1.IPAddressClaim
		addresses []v1alpha1.IPAddress
		classes   []v1alpha1.IPAddressClass
		quota     string // the quota's refusal (charge)
		want      outcome
	}{
		{
			name:    "4-2 adds the protection finalizer and stamps the provisioner",
			claim:   newClaim("web", noFinalizer),
			classes: []v1alpha1.IPAddressClass{public},
			want: outcome{addFinalizer: true, stamp: "p.example.com/public", phase: v1alpha1.ClaimPending, className: "public",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning},
		},
		{
			name:      "4-3 collects an address bound with the claim's UID",
			claim:     newClaim("web", withStatusClass("public")),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(claim))},
			want:      outcome{phase: v1alpha1.ClaimBound, className: "public", addresses: []string{"ip-203-0-113-7"}, bound: v1alpha1.ReasonBound},
		},
		{
			name:      "4-3 never collects a stale binding to an earlier claim of the same name",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", staleFor(claim))},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", phase: v1alpha1.ClaimPending, className: "public",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning},
		},
		{
			name:  "4-3 releases an excess binding of a family, keeping the reported address",
			claim: newClaim("web", withStatusClass("public"), withPhase(v1alpha1.ClaimBound), withReported(newAddress("203.0.113.9", "public"))),
			addresses: []v1alpha1.IPAddress{
				newAddress("203.0.113.7", "public", boundTo(claim)),
				newAddress("203.0.113.9", "public", boundTo(claim)),
			},
			want: outcome{bind: []string{"ip-203-0-113-7 -> none"}, phase: v1alpha1.ClaimBound, className: "public",
				addresses: []string{"ip-203-0-113-9"}, bound: v1alpha1.ReasonBound, events: []string{"Warning ExcessBindingReleased"}},
		},
		{
			name:      "4-3 releases an address of a family the claim no longer asks for (bound by a binder that read it before it was re-targeted)",
			claim:     newClaim("web", withFamily(v1alpha1.IPv6), withStatusClass("public")),
			classes:   []v1alpha1.IPAddressClass{public},
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(claim))},
			want: outcome{stamp: "p.example.com/public", bind: []string{"ip-203-0-113-7 -> none"}, phase: v1alpha1.ClaimPending, className: "public",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning, events: []string{"Warning ExcessBindingReleased"}},
		},
		{
			name:      "4-3 releases an address of a class the claim no longer names",
			claim:     newClaim("web", withClass("private"), withStatusClass("private")),
			classes:   []v1alpha1.IPAddressClass{public, private},
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(claim))},
			want: outcome{stamp: "p.example.com/private", bind: []string{"ip-203-0-113-7 -> none"}, phase: v1alpha1.ClaimPending, className: "private",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning, events: []string{"Warning ExcessBindingReleased"}},
		},
		{
			name:      "4-4 accepts a driver's pre-binding by writing the claim's UID, and 4-6 stamps the claim even so",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", preBoundTo(claim))},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", bind: []string{"ip-203-0-113-7 -> tenant/web uid-web"}, phase: v1alpha1.ClaimBound, className: "public",
				addresses: []string{"ip-203-0-113-7"}, classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonBound},
		},
		{
			name:      "4-4 refuses a pre-binding of another class",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "private", preBoundTo(claim))},
			classes:   []v1alpha1.IPAddressClass{public, private},
			want: outcome{stamp: "p.example.com/public", phase: v1alpha1.ClaimPending, className: "public", classResolved: v1alpha1.ReasonResolved,
				bound: v1alpha1.ReasonWaitingForProvisioning, events: []string{"Warning PreBindingRefused"}},
		},
		{
			name:      "4-4 refuses a pre-binding of a family the claim does not request",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("2001:db8::7", "public", preBoundTo(claim))},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", phase: v1alpha1.ClaimPending, className: "public", classResolved: v1alpha1.ReasonResolved,
				bound: v1alpha1.ReasonWaitingForProvisioning, events: []string{"Warning PreBindingRefused"}},
		},
		{
			name:  "4-4 refuses a pre-binding of a family the claim already holds",
			claim: newClaim("web", withStatusClass("public")),
			addresses: []v1alpha1.IPAddress{
				newAddress("203.0.113.7", "public", boundTo(claim)),
				newAddress("203.0.113.8", "public", preBoundTo(claim)),
			},
			classes: []v1alpha1.IPAddressClass{public},
			want: outcome{phase: v1alpha1.ClaimBound, className: "public", addresses: []string{"ip-203-0-113-7"},
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonBound, events: []string{"Warning PreBindingRefused"}},
		},
		{
			name:      "4-4 a Released pre-binding (an earlier claim of the name was deleted before accepting it) waits for an admin",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", preBoundTo(claim), inPhase(v1alpha1.AddressReleased))},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", phase: v1alpha1.ClaimPending, className: "public", classResolved: v1alpha1.ReasonResolved,
				bound: v1alpha1.ReasonWaitingForProvisioning},
		},
		{
			name:      "4-4 leaves a pre-binding unjudged while the class does not resolve",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", preBoundTo(claim))},
			want: outcome{phase: v1alpha1.ClaimPending, classResolved: v1alpha1.ReasonNoDefaultClass, bound: v1alpha1.ReasonWaitingForClass,
				events: []string{"Warning NoDefaultClass"}},
		},
		{
			name:      "4-5 a fully bound claim does not consult its class, even a deleted one",
			claim:     newClaim("web", withClass("gone"), withStatusClass("gone"), withPhase(v1alpha1.ClaimBound)),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "gone", boundTo(claim))},
			want:      outcome{phase: v1alpha1.ClaimBound, className: "gone", addresses: []string{"ip-203-0-113-7"}, bound: v1alpha1.ReasonBound},
		},
		{
			name:      "4-8 a claim its driver bound before its first status records the class it resolved to",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(claim))},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{phase: v1alpha1.ClaimBound, className: "public", addresses: []string{"ip-203-0-113-7"},
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonBound},
		},
		{
			name:      "4-8 ...but not a class its addresses are not of (the default moved since)",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "private", boundTo(claim))},
			classes:   []v1alpha1.IPAddressClass{public, private},
			want:      outcome{phase: v1alpha1.ClaimBound, addresses: []string{"ip-203-0-113-7"}, bound: v1alpha1.ReasonBound},
		},
		{
			name:      "4-8 ...nor a class that no longer resolves",
			claim:     newClaim("web", withClass("gone")),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "gone", boundTo(claim))},
			classes:   []v1alpha1.IPAddressClass{public},
			want:      outcome{phase: v1alpha1.ClaimBound, addresses: []string{"ip-203-0-113-7"}, bound: v1alpha1.ReasonBound},
		},
		{
			name:      "4-5 a Lost address keeps its family: no second address is bound",
			claim:     newClaim("web", withStatusClass("public"), withPhase(v1alpha1.ClaimBound)),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(claim), inPhase(v1alpha1.AddressLost)), newAddress("203.0.113.8", "public")},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{phase: v1alpha1.ClaimLost, className: "public", addresses: []string{"ip-203-0-113-7"}, bound: v1alpha1.ReasonLost,
				events: []string{"Warning Lost"}},
		},
		{
			name:      "4-8 a claim never bound whose every family is held, one address Lost: Pending, waiting for that address",
			claim:     newClaim("web", withStatusClass("public")),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(claim), inPhase(v1alpha1.AddressLost))},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{phase: v1alpha1.ClaimPending, className: "public", addresses: []string{"ip-203-0-113-7"},
				bound: v1alpha1.ReasonWaitingForAddress},
		},
		{
			name:      "4-8 ...and so when its class is recorded in this pass (an empty reason would be refused by the API server)",
			claim:     newClaim("web"),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(claim), inPhase(v1alpha1.AddressLost))},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{phase: v1alpha1.ClaimPending, className: "public", addresses: []string{"ip-203-0-113-7"},
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForAddress},
		},
		{
			name:    "4-6 spec.className wins over status.className and the default",
			claim:   newClaim("web", withClass("private"), withStatusClass("public")),
			classes: []v1alpha1.IPAddressClass{public, private},
			want: outcome{stamp: "p.example.com/private", phase: v1alpha1.ClaimPending, className: "private",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning},
		},
		{
			name:    "4-6 status.className is sticky when the default moves",
			claim:   newClaim("web", withStatusClass("private")),
			classes: []v1alpha1.IPAddressClass{public, private},
			want: outcome{stamp: "p.example.com/private", phase: v1alpha1.ClaimPending, className: "private",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning},
		},
		{
			name:    "4-6 NoDefaultClass when no class is default",
			claim:   claim,
			classes: []v1alpha1.IPAddressClass{private},
			want: outcome{phase: v1alpha1.ClaimPending, classResolved: v1alpha1.ReasonNoDefaultClass, bound: v1alpha1.ReasonWaitingForClass,
				events: []string{"Warning NoDefaultClass"}},
		},
		{
			name:    "4-6 MultipleDefaultClasses: the core refuses to guess",
			claim:   claim,
			classes: []v1alpha1.IPAddressClass{public, newClass("other", asDefault)},
			want: outcome{phase: v1alpha1.ClaimPending, classResolved: v1alpha1.ReasonMultipleDefaultClasses, bound: v1alpha1.ReasonWaitingForClass,
				events: []string{"Warning MultipleDefaultClasses"}},
		},
		{
			name:    "4-6 ClassNotFound for a named class that does not exist",
			claim:   newClaim("web", withClass("missing")),
			classes: []v1alpha1.IPAddressClass{public},
			want: outcome{phase: v1alpha1.ClaimPending, classResolved: v1alpha1.ReasonClassNotFound, bound: v1alpha1.ReasonWaitingForClass,
				events: []string{"Warning ClassNotFound"}},
		},
		{
			name:    "4-6 ClassNotFound for a class being deleted",
			claim:   newClaim("web", withClass("public")),
			classes: []v1alpha1.IPAddressClass{newClass("public", classDeleting)},
			want: outcome{phase: v1alpha1.ClaimPending, classResolved: v1alpha1.ReasonClassNotFound, bound: v1alpha1.ReasonWaitingForClass,
				events: []string{"Warning ClassNotFound"}},
		},
		{
			name: "4-6 the stamp follows a claim re-targeted before binding",
			claim: newClaim("web", withClass("private"), func(c *v1alpha1.IPAddressClaim) {
				c.Annotations[v1alpha1.AnnotationProvisioner] = "p.example.com/public"
			}),
			classes: []v1alpha1.IPAddressClass{public, private},
			want: outcome{stamp: "p.example.com/private", phase: v1alpha1.ClaimPending, className: "private",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning},
		},
		{
			name:  "4-7 binds the smallest Available address of its class and family",
			claim: claim,
			addresses: []v1alpha1.IPAddress{
				newAddress("203.0.113.9", "public"), newAddress("203.0.113.10", "public"),
				newAddress("203.0.113.1", "private"), newAddress("2001:db8::1", "public"),
			},
			classes: []v1alpha1.IPAddressClass{public, private},
			want: outcome{stamp: "p.example.com/public", bind: []string{"ip-203-0-113-10 -> tenant/web uid-web"}, phase: v1alpha1.ClaimBound,
				className: "public", addresses: []string{"ip-203-0-113-10"}, classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonBound},
		},
		{
			name:      "4-7 skips addresses that are not Available",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.1", "public", inPhase(v1alpha1.AddressPending)), newAddress("203.0.113.2", "public", inPhase(v1alpha1.AddressReleased))},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", phase: v1alpha1.ClaimPending, className: "public",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning},
		},
		{
			name:  "4-7 keep: the namespace's Released address of the same name is taken back before any Available one",
			claim: claim,
			addresses: []v1alpha1.IPAddress{
				newAddress("203.0.113.1", "kept"),
				newAddress("203.0.113.2", "kept", releasedFrom(ns, "api", now.Add(-2*time.Hour))),
				newAddress("203.0.113.3", "kept", releasedFrom(ns, "web", now.Add(-time.Hour))),
			},
			classes: []v1alpha1.IPAddressClass{kept},
			want: outcome{stamp: "p.example.com/kept", bind: []string{"ip-203-0-113-3 -> tenant/web uid-web"}, phase: v1alpha1.ClaimBound,
				className: "kept", addresses: []string{"ip-203-0-113-3"}, classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonBound},
		},
		{
			name:  "4-7 keep: otherwise the one released longest ago",
			claim: claim,
			addresses: []v1alpha1.IPAddress{
				newAddress("203.0.113.2", "kept", releasedFrom(ns, "db", now.Add(-time.Hour))),
				newAddress("203.0.113.3", "kept", releasedFrom(ns, "api", now.Add(-2*time.Hour))),
			},
			classes: []v1alpha1.IPAddressClass{kept},
			want: outcome{stamp: "p.example.com/kept", bind: []string{"ip-203-0-113-3 -> tenant/web uid-web"}, phase: v1alpha1.ClaimBound,
				className: "kept", addresses: []string{"ip-203-0-113-3"}, classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonBound},
		},
		{
			name:      "4-7 keep: another namespace's Released address is never taken",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.2", "kept", releasedFrom("other", "web", now.Add(-time.Hour)))},
			classes:   []v1alpha1.IPAddressClass{kept},
			want: outcome{stamp: "p.example.com/kept", phase: v1alpha1.ClaimPending, className: "kept",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning},
		},
		{
			name:      "4-7 keep: a Released address still attached to its old Service is not taken yet",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.2", "kept", releasedFrom(ns, "web", now.Add(-time.Hour)), attachedTo("web"))},
			classes:   []v1alpha1.IPAddressClass{kept},
			want: outcome{stamp: "p.example.com/kept", phase: v1alpha1.ClaimPending, className: "kept",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning},
		},
		{
			name:      "4-7 without keep, a Released address of the namespace is never taken",
			claim:     claim,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.2", "public", releasedFrom(ns, "web", now.Add(-time.Hour)))},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", phase: v1alpha1.ClaimPending, className: "public",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning},
		},
		{
			name:  "4-7 keep: a Dual claim takes back one of each family",
			claim: dual,
			addresses: []v1alpha1.IPAddress{
				newAddress("203.0.113.2", "kept", releasedFrom(ns, "web", now.Add(-time.Hour))),
				newAddress("2001:db8::2", "kept", releasedFrom(ns, "web", now.Add(-time.Hour))),
				newAddress("2001:db8::1", "kept"),
			},
			classes: []v1alpha1.IPAddressClass{kept},
			want: outcome{stamp: "p.example.com/kept", bind: []string{"ip-203-0-113-2 -> tenant/web uid-web", "ip-2001-db8--2 -> tenant/web uid-web"}, phase: v1alpha1.ClaimBound,
				className: "kept", addresses: []string{"ip-2001-db8--2", "ip-203-0-113-2"}, classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonBound},
		},
		{
			name:  "4-7 keep: a quota refusing the family that needs room leaves the one taken back matched",
			claim: dual,
			addresses: []v1alpha1.IPAddress{
				newAddress("203.0.113.2", "kept", releasedFrom(ns, "web", now.Add(-time.Hour))),
				newAddress("2001:db8::1", "kept"),
			},
			classes: []v1alpha1.IPAddressClass{kept},
			quota:   "exceeded quota",
			want: outcome{stamp: "p.example.com/kept", bind: []string{"ip-203-0-113-2 -> tenant/web uid-web"}, phase: v1alpha1.ClaimPending,
				className: "kept", addresses: []string{"ip-203-0-113-2"}, classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonQuotaExceeded,
				events: []string{"Warning QuotaExceeded"}},
		},
		{
			name:      "4-7 a quota refusing the claim matches nothing else",
			claim:     dual,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public"), newAddress("2001:db8::7", "public")},
			classes:   []v1alpha1.IPAddressClass{public},
			quota:     "exceeded quota",
			want: outcome{stamp: "p.example.com/public", phase: v1alpha1.ClaimPending, className: "public",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonQuotaExceeded, events: []string{"Warning QuotaExceeded"}},
		},
		{
			name:      "4-7 Dual binds one address of each family",
			claim:     dual,
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public"), newAddress("2001:db8::7", "public")},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", bind: []string{"ip-203-0-113-7 -> tenant/web uid-web", "ip-2001-db8--7 -> tenant/web uid-web"},
				phase: v1alpha1.ClaimBound, className: "public", addresses: []string{"ip-2001-db8--7", "ip-203-0-113-7"},
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonBound},
		},
		{
			name:      "4-7 Dual with one family bound binds only the other",
			claim:     newClaim("web", withFamily(v1alpha1.Dual), withStatusClass("public")),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(dual)), newAddress("203.0.113.8", "public"), newAddress("2001:db8::7", "public")},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", bind: []string{"ip-2001-db8--7 -> tenant/web uid-web"},
				phase: v1alpha1.ClaimBound, className: "public", addresses: []string{"ip-2001-db8--7", "ip-203-0-113-7"},
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonBound},
		},
		{
			name:      "4-7 spec.addressName binds only that address",
			claim:     newClaim("web", withAddressName("ip-203-0-113-9")),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.1", "public"), newAddress("203.0.113.9", "public")},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", bind: []string{"ip-203-0-113-9 -> tenant/web uid-web"}, phase: v1alpha1.ClaimBound,
				className: "public", addresses: []string{"ip-203-0-113-9"}, classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonBound},
		},
		{
			name:      "4-7 spec.addressName waits while that address is not Available",
			claim:     newClaim("web", withAddressName("ip-203-0-113-9")),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.1", "public")},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", phase: v1alpha1.ClaimPending, className: "public",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForAddress},
		},
		{
			name:    "4-7 no candidate: the claim waits for its driver",
			claim:   claim,
			classes: []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", phase: v1alpha1.ClaimPending, className: "public",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonWaitingForProvisioning},
		},
		{
			name:      "4-8 a Bound claim whose address disappeared is Lost, not re-provisioned around",
			claim:     newClaim("web", withStatusClass("public"), withPhase(v1alpha1.ClaimBound), withReported(newAddress("203.0.113.7", "public"))),
			classes:   []v1alpha1.IPAddressClass{public},
			addresses: nil,
			want: outcome{stamp: "p.example.com/public", phase: v1alpha1.ClaimLost, className: "public",
				classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonLost, events: []string{"Warning Lost"}},
		},
		{
			name:      "4-8 a Lost claim binds a new address once the Lost one is deleted",
			claim:     newClaim("web", withStatusClass("public"), withPhase(v1alpha1.ClaimLost)),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.8", "public")},
			classes:   []v1alpha1.IPAddressClass{public},
			want: outcome{stamp: "p.example.com/public", bind: []string{"ip-203-0-113-8 -> tenant/web uid-web"}, phase: v1alpha1.ClaimBound,
				className: "public", addresses: []string{"ip-203-0-113-8"}, classResolved: v1alpha1.ReasonResolved, bound: v1alpha1.ReasonBound,
				events: []string{"Normal Bound"}},
		},
		{
			name:      "4-8 a Lost claim returns to Bound when its address comes back",
			claim:     newClaim("web", withStatusClass("public"), withPhase(v1alpha1.ClaimLost)),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(claim))},
			want: outcome{phase: v1alpha1.ClaimBound, className: "public", addresses: []string{"ip-203-0-113-7"}, bound: v1alpha1.ReasonBound,
				events: []string{"Normal Bound"}},
		},
		{
			name:      "4-1 a claim being deleted runs reclaim and nothing of §4",
			claim:     newClaim("web", deleting, noFinalizer, withClass("public")),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.8", "public")},
			classes:   []v1alpha1.IPAddressClass{public},
			want:      outcome{},
		},
		{
			name:      "6-1 Retain: the address is Released, claimRef kept, then the finalizer goes",
			claim:     newClaim("web", deleting),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(claim))},
			want: outcome{release: []string{"ip-203-0-113-7 Released"}, removeFinalizer: true,
				events: []string{"Normal Released"}},
		},
		{
			name:      "6-1 Delete: the address is deleted",
			claim:     newClaim("web", deleting),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(claim), reclaimDelete)},
			want:      outcome{remove: []string{"ip-203-0-113-7"}, removeFinalizer: true},
		},
		{
			name:  "6-1 Conflict and Lost keep their phase: they belong to the driver",
			claim: newClaim("web", deleting, withFamily(v1alpha1.Dual)),
			addresses: []v1alpha1.IPAddress{
				newAddress("203.0.113.7", "public", boundTo(claim), inPhase(v1alpha1.AddressConflict)),
				newAddress("2001:db8::7", "public", boundTo(claim), inPhase(v1alpha1.AddressLost)),
			},
			want: outcome{removeFinalizer: true},
		},
		{
			name:      "6-1 an acceptable pre-binding is reclaimed too; a stale binding is not",
			claim:     newClaim("web", deleting, withStatusClass("public")),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", preBoundTo(claim), reclaimDelete), newAddress("203.0.113.8", "public", staleFor(claim), reclaimDelete)},
			classes:   []v1alpha1.IPAddressClass{public},
			want:      outcome{remove: []string{"ip-203-0-113-7"}, removeFinalizer: true, className: "public"},
		},
		{
			name:      "6-2 a controller-owned claim's addresses are deleted whatever their policy",
			claim:     newClaim("web", deleting, ownedByController),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "public", boundTo(claim))},
			want:      outcome{remove: []string{"ip-203-0-113-7"}, removeFinalizer: true},
		},
		{
			name:      "6-2 keep: a controller-owned claim's addresses follow their policy, Released in the namespace",
			claim:     newClaim("web", deleting, ownedByController, withClass("kept")),
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.7", "kept", boundTo(claim))},
			classes:   []v1alpha1.IPAddressClass{kept},
			want:      outcome{release: []string{"ip-203-0-113-7 Released"}, removeFinalizer: true, events: []string{"Normal Released"}},
		},
		{
			name:  "6-3 a claim without the finalizer is left to go",
			claim: newClaim("web", deleting, noFinalizer),
			want:  outcome{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSnapshot(tc.claim, tc.addresses, tc.classes, now)
			s.quota = tc.quota
			p := decide(s)
			if diff := cmp.Diff(tc.want, summarize(tc.claim, p), cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("plan differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLine: a claim behind older ones in its class's line binds only when
// enough addresses are left for them and for it, and says where it stands;
// a full class and a refused one say so.
func TestLine(t *testing.T) {
	counted := func(c *v1alpha1.IPAddressClass) {
		c.Status.Addresses = []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 3, Bound: 2, Available: 1}}
	}
	class := newClass("public", asDefault, counted)
	room := func(available int64) func(*v1alpha1.IPAddressClass) {
		return func(c *v1alpha1.IPAddressClass) {
			c.Status.Capacity = []v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv4, Total: 16, Allocated: 16 - available, Available: available}}
		}
	}
	free := []v1alpha1.IPAddress{newAddress("203.0.113.1", "public")}
	for _, tc := range []struct {
		name   string
		class  v1alpha1.IPAddressClass
		line   place
		bound  string
		reason string
	}{
		{"4-7 nobody ahead: binds", class, place{available: -1}, "ip-203-0-113-1", v1alpha1.ReasonBound},
		{"4-7 one ahead, one left: waits, 2nd", class, place{ahead: 1, available: 1}, "", v1alpha1.ReasonClassExhausted},
		{"4-7 one ahead, two left: binds", class, place{ahead: 1, available: 2}, "ip-203-0-113-1", v1alpha1.ReasonBound},
		{"4-7 in line in a class with no address counted: its driver is to provision", newClass("public", asDefault),
			place{ahead: 1, available: 0}, "", v1alpha1.ReasonWaitingForProvisioning},
		{"4-7 in line behind a driver with room for all: its driver is to provision", newClass("public", asDefault, counted, room(3)),
			place{ahead: 2, available: 0}, "", v1alpha1.ReasonWaitingForProvisioning},
		{"4-7 in line behind a driver with room only for those ahead: exhausted", newClass("public", asDefault, room(2)),
			place{ahead: 2, available: 0}, "", v1alpha1.ReasonClassExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSnapshot(newClaim("web"), free, []v1alpha1.IPAddressClass{tc.class}, now)
			s.line = map[v1alpha1.IPFamily]place{v1alpha1.IPv4: tc.line}
			got := summarize(s.claim, decide(s))
			if got.bound != tc.reason || (tc.bound == "") != (len(got.addresses) == 0) {
				t.Errorf("bound %v (%s), want %q (%s)", got.addresses, got.bound, tc.bound, tc.reason)
			}
		})
	}
	s := newSnapshot(newClaim("web"), free, []v1alpha1.IPAddressClass{class}, now)
	s.line = map[v1alpha1.IPFamily]place{v1alpha1.IPv4: {ahead: 1, available: 1}}
	p := decide(s)
	if c := meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionBound); c == nil || c.Message != "2nd waiting for IPv4 in class public: no IPv4 address is left to bind" {
		t.Errorf("Bound condition %+v", c)
	}
	refused := newClass("public", asDefault, func(c *v1alpha1.IPAddressClass) {
		c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "PoolRefused", Message: "no pool"}}
	})
	if got := summarize(newClaim("web"), decide(newSnapshot(newClaim("web"), nil, []v1alpha1.IPAddressClass{refused}, now))); got.bound != v1alpha1.ReasonPoolRefused {
		t.Errorf("a refused class: %s", got.bound)
	}
	full := newClass("public", asDefault, func(c *v1alpha1.IPAddressClass) {
		c.Status.Addresses = []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 2, Bound: 2}}
	})
	if got := summarize(newClaim("web"), decide(newSnapshot(newClaim("web"), nil, []v1alpha1.IPAddressClass{full}, now))); got.bound != v1alpha1.ReasonClassExhausted {
		t.Errorf("a full class: %s", got.bound)
	}
	if got := summarize(newClaim("web"), decide(newSnapshot(newClaim("web"), nil, []v1alpha1.IPAddressClass{newClass("public", asDefault, room(0))}, now))); got.bound != v1alpha1.ReasonClassExhausted {
		t.Errorf("a driver's range used up: %s", got.bound)
	}
}

// A place far back in line is given by its order of magnitude, so that
// the line moving rewrites only the claims near its front.
func TestStanding(t *testing.T) {
	for ahead, want := range map[int]string{
		0:    "1st waiting for IPv4 in class public",
		2:    "3rd waiting for IPv4 in class public",
		9:    "10th waiting for IPv4 in class public",
		10:   "waiting for IPv4 in class public behind 10 or more older claims",
		99:   "waiting for IPv4 in class public behind 10 or more older claims",
		100:  "waiting for IPv4 in class public behind 100 or more older claims",
		5000: "waiting for IPv4 in class public behind 1000 or more older claims",
	} {
		if got := standing(ahead, "IPv4", "public"); got != want {
			t.Errorf("standing(%d) = %q, want %q", ahead, got, want)
		}
	}
}

func TestOrdinal(t *testing.T) {
	for n, want := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 102: "102nd"} {
		if got := ordinal(n); got != want {
			t.Errorf("ordinal(%d) = %s, want %s", n, got, want)
		}
	}
}

// A new claim that only waits for its driver gets no status within
// provisionGrace of its creation: the driver usually answers first, and
// the claim's first status is then Bound — one write instead of two.
func TestDecideDefersTheFirstWaitForProvisioning(t *testing.T) {
	public := newClass("public", asDefault)
	ready := newClass("public", asDefault, func(c *v1alpha1.IPAddressClass) {
		c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"}}
	})
	for _, tc := range []struct {
		name    string
		class   v1alpha1.IPAddressClass
		age     time.Duration
		written bool
		grace   time.Duration
		unnamed bool // spec.className left empty, as without the webhook
	}{
		{"4-8 a claim one second old: no status yet, a pass after the grace", public, time.Second, false, provisionGrace, false},
		{"4-8 a claim past the grace: Pending, WaitingForProvisioning", public, provisionGrace + time.Second, true, provisionGrace, false},
		{"4-8 a class its driver reported Ready: a longer grace, the driver is working through a burst", ready, provisionGrace + time.Second, false, readyGrace, false},
		{"4-8 ...and past it: Pending, WaitingForProvisioning", ready, readyGrace, true, readyGrace, false},
		{"4-8 a claim naming no class: written at once, its driver reads the class from status.className", ready, time.Second, true, readyGrace, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := newClaim("web", func(c *v1alpha1.IPAddressClaim) { c.CreationTimestamp = metav1.NewTime(now.Add(-tc.age)) })
			if !tc.unnamed {
				claim.Spec.ClassName = "public" // as the webhook defaults it
			}
			p := decide(newSnapshot(claim, nil, []v1alpha1.IPAddressClass{tc.class}, now))
			if written := p.status != nil; written != tc.written {
				t.Fatalf("status written = %v, want %v", written, tc.written)
			}
			if want := min(tc.grace-tc.age, graceRecheck); !tc.written && p.recheck != want {
				t.Errorf("recheck = %v, want %v", p.recheck, want)
			}
			if tc.written && summarize(claim, p).bound != v1alpha1.ReasonWaitingForProvisioning {
				t.Errorf("bound reason = %q", summarize(claim, p).bound)
			}
		})
	}
}

// A Dual claim of a class whose range has no IPv6 address holds its IPv4
// address at once and waits for an IPv6 one that only a change of the range
// brings: nothing supersedes that status soon, so it is written at once, the
// IPv4 address in it, however new the claim.
func TestDecideWritesALastingWaitAtOnce(t *testing.T) {
	class := newClass("public", asDefault, func(c *v1alpha1.IPAddressClass) {
		c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"}}
		c.Status.Capacity = []v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv4, Total: 16, Available: 15}}
	})
	claim := newClaim("web", withFamily(v1alpha1.Dual), withClass("public"),
		func(c *v1alpha1.IPAddressClaim) { c.CreationTimestamp = metav1.NewTime(now.Add(-time.Second)) })
	v4 := newAddress("203.0.113.7", "public", boundTo(claim))
	p := decide(newSnapshot(claim, []v1alpha1.IPAddress{v4}, []v1alpha1.IPAddressClass{class}, now))
	if p.status == nil {
		t.Fatal("4-8 status deferred for a wait nothing ends soon")
	}
	if p.status.Phase != v1alpha1.ClaimPending || len(p.status.Addresses) != 1 || p.status.Addresses[0].Name != v4.Name {
		t.Errorf("4-8 status: phase %q, addresses %v; want Pending with %s", p.status.Phase, p.status.Addresses, v4.Name)
	}
	if got := summarize(claim, p).bound; got != v1alpha1.ReasonWaitingForProvisioning {
		t.Errorf("4-8 bound reason = %q", got)
	}
}

// TestReleasedMessage: the Released event and condition say what becomes
// of the address, as its class and the held annotation decide (5-7).
func TestReleasedMessage(t *testing.T) {
	claim := newClaim("web")
	plain := newClass("public")
	delayed := newClass("public", func(c *v1alpha1.IPAddressClass) { c.Spec.ReleaseDelay = &metav1.Duration{Duration: time.Hour} })
	kept := newClass("public", func(c *v1alpha1.IPAddressClass) { c.Spec.KeepReleasedInNamespace = true })
	addr := newAddress("203.0.113.7", "public")
	heldAddr := newAddress("203.0.113.7", "public", func(a *v1alpha1.IPAddress) {
		a.Annotations = map[string]string{v1alpha1.AnnotationHeld: "true"}
	})
	const head = "claim tenant/web was deleted; the address is retained"
	for _, tc := range []struct {
		name  string
		addr  v1alpha1.IPAddress
		class *v1alpha1.IPAddressClass
		want  string
	}{
		{"6-1 no delay: an admin's", addr, &plain, head + " until an admin clears spec.claimRef or deletes it"},
		{"6-1 the class gone: an admin's", addr, nil, head + " until an admin clears spec.claimRef or deletes it"},
		{"5-7 a releaseDelay: back in the pool after it", addr, &delayed,
			head + " and returns to the pool 1h0m0s after its release unless an admin clears spec.claimRef or deletes it first"},
		{"5-7 held: exempt from the delay", heldAddr, &delayed, head + " until an admin clears spec.claimRef or deletes it"},
		{"6-2 kept in the namespace", addr, &kept,
			head + " for the next claim in namespace tenant that asks for its class, until an admin clears spec.claimRef or deletes it"},
	} {
		if got := releasedMessage(claim, &tc.addr, tc.class); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// 4-8: a Lost claim whose quota refuses a replacement for the address gone
// says so, rather than that another comes once one is free.
func TestLostMessageUnderQuota(t *testing.T) {
	public := newClass("public", asDefault)
	claim := newClaim("web", withStatusClass("public"), withPhase(v1alpha1.ClaimBound), withReported(newAddress("203.0.113.7", "public")))
	s := newSnapshot(claim, nil, []v1alpha1.IPAddressClass{public}, now)
	s.quota = "exceeded quota: ResourceQuota q"
	p := decide(s)
	if p.status == nil || p.status.Phase != v1alpha1.ClaimLost {
		t.Fatalf("status %+v, want Lost", p.status)
	}
	const want = "the IPv4 address is gone; another is bound in its place once its quota has room (exceeded quota: ResourceQuota q)"
	if c := meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionBound); c == nil || c.Message != want || c.Reason != v1alpha1.ReasonQuotaExceeded {
		t.Errorf("Bound condition %v, want reason %s and message %q", c, v1alpha1.ReasonQuotaExceeded, want)
	}
	// Held back by its quota, it stands in no line: an address it cannot
	// take goes to the next claim, of any namespace.
	claim.Status = *p.status
	if keys := index.LineKeys(claim); len(keys) > 0 {
		t.Errorf("a Lost claim its quota refuses stands in lines %v", keys)
	}
}

// 4-8: a Lost claim whose family its class's range has none of is not
// promised a replacement nothing provisions: the message says why none
// comes.
func TestLostMessageForARangeless(t *testing.T) {
	public := newClass("public", asDefault, func(c *v1alpha1.IPAddressClass) {
		c.Status.Capacity = []v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv4, Total: 16, Available: 10}}
	})
	claim := newClaim("web", withFamily(v1alpha1.Dual), withStatusClass("public"), withPhase(v1alpha1.ClaimBound),
		withReported(newAddress("203.0.113.7", "public"), newAddress("2001:db8::7", "public")))
	v4 := newAddress("203.0.113.7", "public", boundTo(claim))
	p := decide(newSnapshot(claim, []v1alpha1.IPAddress{v4}, []v1alpha1.IPAddressClass{public}, now))
	if p.status == nil || p.status.Phase != v1alpha1.ClaimLost {
		t.Fatalf("status %+v, want Lost", p.status)
	}
	const want = `the IPv6 address is gone; none can be bound in its place for now: waiting for provisioner p.example.com/public to provision IPv6 in class "public", whose range it counts has no IPv6 address (status.capacity): one is provisioned once the range has one`
	if c := meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionBound); c == nil || c.Message != want || c.Reason != v1alpha1.ReasonLost {
		t.Errorf("Bound condition %v, want reason Lost and message %q", c, want)
	}
}

// A Lost claim whose class is gone is not promised a replacement its class
// cannot give.
func TestLostMessageWithoutItsClass(t *testing.T) {
	claim := newClaim("web", withClass("gone"), withStatusClass("gone"), withPhase(v1alpha1.ClaimBound), withReported(newAddress("203.0.113.7", "gone")))
	p := decide(newSnapshot(claim, nil, nil, now))
	if p.status == nil || p.status.Phase != v1alpha1.ClaimLost {
		t.Fatalf("status %+v, want Lost", p.status)
	}
	const want = `the IPv4 address is gone; another is bound in its place once its class resolves (IPAddressClass "gone" does not exist)`
	if c := meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionBound); c == nil || c.Message != want {
		t.Errorf("Bound condition %v, want message %q", c, want)
	}
}

// 4-7: a claim naming its address says why it waits for it: no such
// address, one of another class or family (never bound), one bound to
// another claim, or one not Available yet.
func TestNamedWait(t *testing.T) {
	public := newClass("public")
	claim := newClaim("web", withClass("public"), func(c *v1alpha1.IPAddressClaim) { c.Spec.AddressName = "ip-203-0-113-7" })
	other := newClaim("db")
	for _, tc := range []struct {
		name string
		a    *v1alpha1.IPAddress
		want string
	}{
		{"1 no such address", nil, "waiting for IPAddress ip-203-0-113-7, which does not exist; spec.addressName names an IPAddress object, " +
			"ip- followed by its IP with each . or : written as - and 0 appended to a trailing - (ip-2001-db8--0 for 2001:db8::)"},
		{"2 another class", ptrTo(newAddress("203.0.113.7", "private")),
			`IPAddress ip-203-0-113-7 is of class "private", and the claim asks for class "public": it never binds it`},
		{"3 another family", ptrTo(newAddress("2001:db8::7", "public")),
			"IPAddress ip-203-0-113-7 is IPv6, and the claim asks for IPv4: it never binds it"},
		{"4 bound to another claim", ptrTo(newAddress("203.0.113.7", "public", boundTo(other))),
			"waiting for IPAddress ip-203-0-113-7, whose claimRef names IPAddressClaim tenant/db (Bound)"},
		{"4b held in another namespace: nothing of its holder, phase or class", ptrTo(newAddress("203.0.113.7", "private", func(a *v1alpha1.IPAddress) {
			a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "other-tenant", Name: "shop", UID: "uid-shop"}
			a.Status.Phase = v1alpha1.AddressBound
		})), "IPAddress ip-203-0-113-7 is reserved outside this namespace; spec.addressName binds only an Available address"},
		{"5 not Available yet", ptrTo(newAddress("203.0.113.7", "public", inPhase(v1alpha1.AddressPending))),
			`waiting for IPAddress ip-203-0-113-7 to be Available in class "public" as IPv4`},
		{"6 Released by an earlier claim of this name (a restored claim)", ptrTo(newAddress("203.0.113.7", "public", releasedFrom("tenant", "web", time.Now()))),
			"waiting for IPAddress ip-203-0-113-7, which an earlier IPAddressClaim of this name (uid uid-earlier-web) held and which is Released: " +
				"it is Available again once an administrator clears its spec.claimRef"},
		{"6b ...in Conflict (its driver's until an administrator clears it)", ptrTo(newAddress("203.0.113.7", "public", func(a *v1alpha1.IPAddress) {
			a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: "uid-earlier-web"}
			a.Status.Phase = v1alpha1.AddressConflict
		})), "waiting for IPAddress ip-203-0-113-7, which an earlier IPAddressClaim of this name (uid uid-earlier-web) held and which is Conflict: " +
			"it is Available again once an administrator clears its spec.claimRef"},
		{"7 still Bound to an earlier claim of this name (being reclaimed)", ptrTo(newAddress("203.0.113.7", "public", func(a *v1alpha1.IPAddress) {
			a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: "uid-earlier-web"}
			a.Status.Phase = v1alpha1.AddressBound
		})), "waiting for IPAddress ip-203-0-113-7, which an earlier IPAddressClaim of this name (uid uid-earlier-web) held and which is Bound, being released or deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := namedWait(claim, tc.a, &public, []string{"IPv4"}); got != tc.want {
				t.Errorf("namedWait = %q, want %q", got, tc.want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// A claim asking a class for a family its driver counts no range of (an
// IPv4 pool, a Dual claim) is told that nothing is provisioned until the
// range has one.
func TestWhyWaitingForARangeless(t *testing.T) {
	class := newClass("public", func(c *v1alpha1.IPAddressClass) {
		c.Status.Capacity = []v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv4, Total: 16, Available: 10}}
	})
	w := whyWaiting(snapshot{}, &class, []string{"IPv6"})
	want := `waiting for provisioner ` + class.Spec.Provisioner + ` to provision IPv6 in class "public", whose range it counts has no IPv6 address (status.capacity): one is provisioned once the range has one`
	if w.reason != v1alpha1.ReasonWaitingForProvisioning || w.message != want {
		t.Errorf("%s: %q, want %q", w.reason, w.message, want)
	}
	if w := whyWaiting(snapshot{}, &class, []string{"IPv4"}); strings.Contains(w.message, "range") {
		t.Errorf("a family the range has: %q", w.message)
	}
	// Addresses of IPv6 exist, all taken (their range removed from the
	// pool, they went Lost): the class has none left, and the claim is
	// told where one would come from.
	class.Status.Addresses = []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv6, Total: 2, Bound: 2}}
	w = whyWaiting(snapshot{line: map[v1alpha1.IPFamily]place{v1alpha1.IPv6: {available: -1}}}, &class, []string{"IPv6"})
	want = `1st waiting for IPv6 in class public: no IPv6 address is left to bind, and the range its provisioner counts has none (status.capacity): one is provisioned once the range has one`
	if w.reason != v1alpha1.ReasonClassExhausted || w.message != want || !w.lasting {
		t.Errorf("%s: %q (lasting %v), want %q", w.reason, w.message, w.lasting, want)
	}
}

// A restored claim waiting for the Released address of its predecessor is
// told when the class's releaseDelay brings it back.
func TestEarlierClaimsAddressAfterReleaseDelay(t *testing.T) {
	class := newClass("public", func(c *v1alpha1.IPAddressClass) { c.Spec.ReleaseDelay = &metav1.Duration{Duration: time.Hour} })
	a := newAddress("203.0.113.7", "public", releasedFrom("tenant", "web", time.Now()))
	want := "waiting for IPAddress ip-203-0-113-7, which an earlier IPAddressClaim of this name (uid uid-earlier-web) held and which is Released: " +
		"it is Available again 1h0m0s after its release, or once an administrator clears its spec.claimRef"
	if got := earlierClaimsAddress(&a, &class); got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}

// 4-6: with no default class but one being deleted, which still shows the
// annotation, the claim is told that one is leaving, not that none is marked.
func TestResolveClassNamesADepartingDefault(t *testing.T) {
	r := resolveClass(newClaim("web"), []v1alpha1.IPAddressClass{newClass("public", asDefault, classDeleting), newClass("private")})
	want := "the claim names no class and the default class public is being deleted; name one in spec.className or mark another default"
	if r.class != nil || r.reason != v1alpha1.ReasonNoDefaultClass || r.message != want {
		t.Errorf("resolution: %s %q, want NoDefaultClass %q", r.reason, r.message, want)
	}
}

// 4-8: a Dual claim never Bound whose IPv4 address went Lost while its
// IPv6 one is still to come says both: the wait of the family it lacks,
// and the Lost address.
func TestPendingClaimTellsItsLostAddress(t *testing.T) {
	public := newClass("public", asDefault)
	claim := newClaim("web", withFamily(v1alpha1.Dual), withStatusClass("public"))
	v4 := newAddress("203.0.113.7", "public", boundTo(claim), inPhase(v1alpha1.AddressLost))
	p := decide(newSnapshot(claim, []v1alpha1.IPAddress{v4}, []v1alpha1.IPAddressClass{public}, now))
	if p.status == nil || p.status.Phase != v1alpha1.ClaimPending {
		t.Fatalf("status %+v, want Pending", p.status)
	}
	cond := meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionBound)
	if cond == nil || !strings.Contains(cond.Message, "IPAddress ip-203-0-113-7, which its provisioner no longer holds (Lost), waits to be held again") ||
		!strings.Contains(cond.Message, "IPv6") {
		t.Errorf("Bound condition %v; want the IPv6 wait and the Lost address", cond)
	}
}

// TestReclaimDatesATakenBackReleaseAnew: an address of a class that keeps
// Released addresses in their namespace, taken back by a claim deleted
// before the address's pass marked it Bound, still shows the earlier
// claim's release. The reclaim dates it from now, so that releaseDelay
// counts from this release — whether the earlier claim had the same name
// (then it was gone before this one was created) or another (this one may
// have waited for the address since before it was released). A release
// this claim's reclaim wrote already (a retried pass) keeps its date.
func TestReclaimDatesATakenBackReleaseAnew(t *testing.T) {
	created := now.Add(-time.Minute)
	claim := newClaim("web", deleting, func(c *v1alpha1.IPAddressClaim) { c.CreationTimestamp = metav1.NewTime(created) })
	deleted := func(name string) string { return "claim " + ns + "/" + name + " was deleted; the address is retained" }
	for _, tc := range []struct {
		name, message string
		releasedAt    time.Time
		want          time.Time
	}{
		{"6-1 keep: released from an earlier claim of the name, dated now", deleted("web"), now.Add(-time.Hour), now},
		{"6-1 keep: released from a claim of another name since this one waits, dated now", deleted("db"), created.Add(30 * time.Second), now},
		{"6-1 keep: released by the address's pass as replaced by this claim, dated now",
			"claim " + ns + "/web was replaced by a new claim of the same name; the address is retained", created.Add(30 * time.Second), now},
		{"6-1 keep: released by this claim's reclaim already, date kept", deleted("web"), created.Add(time.Second), created.Add(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAddress("203.0.113.7", "public", boundTo(claim), func(a *v1alpha1.IPAddress) {
				binding.SetPhase(&a.Status, v1alpha1.AddressReleased, tc.message, tc.releasedAt)
			})
			p := decide(newSnapshot(claim, []v1alpha1.IPAddress{a}, nil, now))
			if len(p.release) != 1 {
				t.Fatalf("released %d addresses, want 1", len(p.release))
			}
			c := meta.FindStatusCondition(p.release[0].Status.Conditions, v1alpha1.ConditionBound)
			if c == nil || !c.LastTransitionTime.Time.Equal(tc.want) {
				t.Errorf("Bound condition %+v, want lastTransitionTime %s", c, tc.want)
			}
		})
	}
}
