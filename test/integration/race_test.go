package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// Concurrent binders (§4 step 7: determinism plus optimistic concurrency),
// in the spirit of Kubernetes' TestPersistentVolumeBindRace.

// createClaims creates n claims of class concurrently, named c0…c(n-1).
func (e *env) createClaims(n int, class string) {
	e.t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs <- k8s.Create(e.ctx, e.newClaim(fmt.Sprintf("c%d", i), class))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.g.Expect(err).NotTo(HaveOccurred())
	}
}

// bindings lists the test's claims and the class's addresses, and checks
// that they agree: every claimRef names a live claim with its UID, no claim
// is named by two addresses, and every address a claim's status lists names
// that claim. It returns the number of Bound claims and of addresses with
// a claimRef.
func (e *env) bindings(g Gomega, class string) (claims []v1alpha1.IPAddressClaim, bound, referenced int) {
	var cl v1alpha1.IPAddressClaimList
	g.Expect(k8s.List(e.ctx, &cl, client.InNamespace(e.ns))).To(Succeed())
	var al v1alpha1.IPAddressList
	g.Expect(k8s.List(e.ctx, &al)).To(Succeed())

	byName := map[string]*v1alpha1.IPAddressClaim{}
	for i := range cl.Items {
		byName[cl.Items[i].Name] = &cl.Items[i]
	}
	refs := map[string]string{} // claim → address naming it
	addrs := map[string]*v1alpha1.IPAddress{}
	for i := range al.Items {
		a := &al.Items[i]
		if a.Spec.ClassName != class {
			continue
		}
		addrs[a.Name] = a
		ref := a.Spec.ClaimRef
		if ref == nil {
			continue
		}
		referenced++
		g.Expect(ref.Namespace).To(Equal(e.ns))
		c, ok := byName[ref.Name]
		g.Expect(ok).To(BeTrue(), "%s names claim %s, which does not exist", a.Name, ref.Name)
		g.Expect(ref.UID).To(Equal(c.UID), "%s names claim %s with another UID", a.Name, ref.Name)
		g.Expect(refs).NotTo(HaveKey(ref.Name), "claim %s is named by both %s and %s", ref.Name, refs[ref.Name], a.Name)
		refs[ref.Name] = a.Name
	}
	for i := range cl.Items {
		c := &cl.Items[i]
		g.Expect(len(c.Status.Addresses)).To(BeNumerically("<=", 1), "claim %s lists %v", c.Name, c.Status.Addresses)
		for _, listed := range c.Status.Addresses {
			a, ok := addrs[listed.Name]
			g.Expect(ok).To(BeTrue(), "claim %s lists %s, not an address of the class", c.Name, listed.Name)
			g.Expect(a.Spec.ClaimRef).NotTo(BeNil(), "claim %s lists %s, which has no claimRef", c.Name, a.Name)
			g.Expect(a.Spec.ClaimRef.Name).To(Equal(c.Name), "claim %s lists %s, which is bound to %s", c.Name, a.Name, a.Spec.ClaimRef.Name)
		}
		if c.Status.Phase == v1alpha1.ClaimBound {
			bound++
			g.Expect(c.Status.Addresses).To(HaveLen(1))
		}
	}
	return cl.Items, bound, referenced
}

// oneAddressManyClaims: one Available address, 100 claims at once: exactly
// one binds, and it stays that way.
func oneAddressManyClaims(t *testing.T, managers int) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	for range managers {
		startManager(t)
	}
	addr := e.createAddress(e.v4(1), class)
	e.addressPhase(addr.Name, v1alpha1.AddressAvailable)

	const n = 100
	start := time.Now()
	e.createClaims(n, class)
	created := time.Since(start)
	e.eventuallyWithin(eventuallyMany, func(g Gomega) {
		claims, bound, _ := e.bindings(g, class)
		g.Expect(claims).To(HaveLen(n))
		for _, c := range claims {
			g.Expect(c.Status.Phase).NotTo(BeEmpty(), "claim %s has no phase yet", c.Name)
		}
		g.Expect(bound).To(Equal(1))
	})
	t.Logf("%d claims created in %s, all with a phase after %s", n, created.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	e.consistently(3*time.Second, func(g Gomega) {
		claims, bound, referenced := e.bindings(g, class)
		g.Expect(bound).To(Equal(1))
		g.Expect(referenced).To(Equal(1))
		pending := 0
		for _, c := range claims {
			if c.Status.Phase == v1alpha1.ClaimPending {
				pending++
				g.Expect(c.Status.Addresses).To(BeEmpty())
			}
		}
		g.Expect(pending).To(Equal(n - 1))
	})
}

func TestRace_4_7_HundredClaimsOneAddress(t *testing.T) {
	oneAddressManyClaims(t, 1)
}

// Two managers bind at once (leader election off): only the resource
// version precondition keeps them from binding the address twice.
func TestRace_4_7_HundredClaimsOneAddressTwoManagers(t *testing.T) {
	oneAddressManyClaims(t, 2)
}

// A manager stopped partway through binding 50 claims to 50 addresses, and
// a fresh one (empty caches, no memory of the first's writes) finishing the
// job: every claim ends with exactly one address, no address with two claims.
func TestRace_4_7_ManagerRestart(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	const n = 50
	// Throttled, so that binding 50 takes seconds and the stop lands midway.
	stop := startManager(t, func(cfg *rest.Config) {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(40, 10)
	})
	for i := 1; i <= n; i++ {
		e.createAddress(e.v4(i), class)
	}
	e.eventuallyWithin(eventuallyMany, func(g Gomega) {
		var list v1alpha1.IPAddressList
		g.Expect(k8s.List(e.ctx, &list)).To(Succeed())
		available := 0
		for _, a := range list.Items {
			if a.Spec.ClassName == class && a.Status.Phase == v1alpha1.AddressAvailable {
				available++
			}
		}
		g.Expect(available).To(Equal(n))
	})

	e.createClaims(n, class)
	boundAtStop := 0
	e.g.Eventually(func(g Gomega) {
		_, bound, _ := e.bindings(g, class)
		boundAtStop = bound
		g.Expect(bound).To(BeNumerically(">=", 10))
	}).WithTimeout(eventuallyMany).WithPolling(10 * time.Millisecond).Should(Succeed())
	stop()
	_, boundAtStop, _ = e.bindings(e.g, class)
	t.Logf("%d of %d claims Bound when the first manager stopped", boundAtStop, n)

	startManager(t)
	e.eventuallyWithin(eventuallyMany, func(g Gomega) {
		claims, bound, referenced := e.bindings(g, class)
		g.Expect(claims).To(HaveLen(n))
		g.Expect(bound).To(Equal(n))
		g.Expect(referenced).To(Equal(n))
	})
	e.consistently(time.Second, func(g Gomega) {
		_, bound, referenced := e.bindings(g, class)
		g.Expect(bound).To(Equal(n))
		g.Expect(referenced).To(Equal(n))
	})
}

// Waiting claims are woken as addresses become Available one after
// another, as a driver provisioning one at a time makes them: every claim
// ends Bound, none is left waiting beside an Available address.
func TestRace_4_7_WaitingClaimsBindAsAddressesTrickleIn(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	const n = 30
	e.createClaims(n, class)
	e.eventuallyWithin(eventuallyMany, func(g Gomega) {
		claims, _, _ := e.bindings(g, class)
		g.Expect(claims).To(HaveLen(n))
		for _, c := range claims {
			g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimPending), "claim %s", c.Name)
		}
	})
	for i := 1; i <= n; i++ {
		e.createAddress(e.v4(i), class)
		time.Sleep(2 * time.Millisecond)
	}
	e.eventuallyWithin(2*eventually, func(g Gomega) {
		_, bound, referenced := e.bindings(g, class)
		g.Expect(referenced).To(Equal(n))
		g.Expect(bound).To(Equal(n), "claims left waiting beside an Available address of their class")
	})
}

// failStatusWrites makes the API server refuse every status write of one
// claim, as a transient failure would, until the returned func is called.
// It is an admission policy, so the core sees an ordinary failed write.
func (e *env) failStatusWrites(claim string) (restore func()) {
	e.t.Helper()
	name := e.class("fail-status-" + claim)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups:   []string{v1alpha1.GroupVersion.Group},
							APIVersions: []string{v1alpha1.GroupVersion.Version},
							Resources:   []string{"ipaddressclaims/status"},
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.namespace != %q || object.metadata.name != %q", e.ns, claim),
				Message:    "status writes of this claim fail for now",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	e.create(policy)
	e.create(binding)
	restore = sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), eventually)
		defer cancel()
		for _, obj := range []client.Object{binding, policy} {
			if err := k8s.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				e.t.Errorf("deleting %s: %v", obj.GetName(), err)
			}
		}
	})
	e.t.Cleanup(restore)
	// In effect once a dry-run status write is refused.
	e.eventually(func(g Gomega) {
		c := e.getClaim(g, claim)
		c.Status.ClassName = "probe"
		err := k8s.Status().Update(e.ctx, c, client.DryRunAll)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("status writes of this claim fail for now"))
	})
	return restore
}

// A claim the matcher wakes for a new Available address must not be one
// that no longer needs it: here the older of two waiting claims has bound
// the first address but cannot record that in its status for a while (a
// failed write, which the next pass repairs). When the second address
// becomes Available, the other claim must still get it.
func TestRace_4_7_WaitingClaimNotStarvedByAFailedStatusWrite(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	// "a-first" sorts before "b-second": the older of the two even when
	// both are created within one second.
	e.createClaim("a-first", class)
	e.createClaim("b-second", class)
	e.eventually(func(g Gomega) {
		for _, name := range []string{"a-first", "b-second"} {
			g.Expect(e.getClaim(g, name).Status.Phase).To(Equal(v1alpha1.ClaimPending))
		}
	})
	restore := e.failStatusWrites("a-first")

	first := e.createAddress(e.v4(1), class)
	e.eventually(func(g Gomega) {
		a := e.getAddress(g, first.Name)
		g.Expect(a.Spec.ClaimRef).NotTo(BeNil())
		g.Expect(a.Spec.ClaimRef.Name).To(Equal("a-first"))
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressBound))
	}, "the first address goes to the older claim")
	e.g.Expect(e.getClaim(e.g, "a-first").Status.Phase).To(Equal(v1alpha1.ClaimPending), "its status write is failing")

	second := e.createAddress(e.v4(2), class)
	e.addressPhase(second.Name, v1alpha1.AddressAvailable)
	time.Sleep(500 * time.Millisecond) // for the matcher to act on it
	restore()

	e.claimBoundTo("a-first", first.Name)
	e.claimBoundTo("b-second", second.Name)
}
