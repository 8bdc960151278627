package policies_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"

	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/policies"
	"github.com/cozystack/address-controller/policies/policytest"
)

// service is a tenant's LoadBalancer Service with the given changes.
func service(changes ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "web",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"example.com/owner": "team-a"},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	for _, change := range changes {
		change(svc)
	}
	return svc
}

func with(f policytest.Field, value string) func(*corev1.Service) {
	return func(svc *corev1.Service) { f.Set(svc, value) }
}

func without(f policytest.Field) func(*corev1.Service) {
	return func(svc *corev1.Service) { f.Unset(svc) }
}

// otherEdits change everything a tenant may change: a label, an
// unreserved annotation, a port.
func otherEdits(svc *corev1.Service) {
	svc.Labels["tier"] = "frontend"
	svc.Annotations["example.com/owner"] = "team-b"
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443})
}

// write is one kind of write of a reserved field.
type write struct {
	does        string // completes "<principal> ... is admitted/denied"
	touches     bool   // whether a reserved field changes
	operation   admission.Operation
	subresource string
	old, new    *corev1.Service
}

// writesOf lists the writes of f: the four that touch it and one that
// leaves it alone while editing the rest of the Service.
func writesOf(f policytest.Field) []write {
	writes := []write{
		{"creating a Service with " + f.Path, true, admission.Create, "",
			nil, service(with(f, f.First))},
		{"adding " + f.Path + " to a Service", true, admission.Update, "",
			service(), service(with(f, f.First))},
		{"changing " + f.Path, true, admission.Update, "",
			service(with(f, f.First)), service(with(f, f.Second))},
		{"removing " + f.Path, true, admission.Update, "",
			service(with(f, f.First)), service(without(f))},
		{"editing the rest of a Service that has " + f.Path, false, admission.Update, "",
			service(with(f, f.First)), service(with(f, f.First), otherEdits)},
	}
	// A status write can change metadata but never the spec (the API
	// server resets it before admission), so only annotations are tried.
	if f.Annotation != "" {
		writes = append(writes, write{"changing " + f.Path + " through services/status", true, admission.Update, "status",
			service(with(f, f.First)), service(with(f, f.Second))})
	}
	return writes
}

var (
	driver = principal{"system:serviceaccount:metallb-iad-system:metallb-iad",
		[]string{"system:serviceaccounts", "system:serviceaccounts:metallb-iad-system", "system:authenticated"}}
	tenant = principal{"alice", []string{"tenant-a-admins", "system:authenticated"}}
)

type principalCase struct {
	who     string
	p       principal
	allowed bool
}

// matrixPrincipals are the principals of TestServicePins_AdmissionMatrix,
// against params that add one user and one group to the shipped lists.
var matrixPrincipals = []principalCase{
	{"a tenant", tenant, false},
	{"a user named like an allowed group", principal{"system:masters", []string{"system:authenticated"}}, false},
	{"another ServiceAccount of the driver's namespace", principal{"system:serviceaccount:metallb-iad-system:default",
		[]string{"system:serviceaccounts", "system:serviceaccounts:metallb-iad-system", "system:authenticated"}}, false},
	{"the driver's ServiceAccount", driver, true},
	{"a member of system:masters", principal{"admin", []string{"system:masters", "system:authenticated"}}, true},
	{"a member of kubeadm:cluster-admins", principal{"kubernetes-admin", []string{"kubeadm:cluster-admins", "system:authenticated"}}, true},
	{"a member of cozystack-cluster-admin", principal{"oidc:root", []string{"cozystack-cluster-admin", "system:authenticated"}}, true},
	{"a user added by the params", principal{"ops-bot", []string{"system:authenticated"}}, true},
	{"a member of a group added by the params", principal{"bob", []string{"system:authenticated", "network-operators"}}, true},
}

// extendedParams are the shipped params with one more user and group, as
// an operator would configure them (the lists replace the shipped ones, so
// they repeat them).
func extendedParams(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	_, _, params := shipped(t)
	params.Data["allowedUsernames"] += "ops-bot\n"
	params.Data["allowedGroups"] += "network-operators\n"
	return params
}

func TestServicePins_AdmissionMatrix(t *testing.T) {
	policy, binding, _ := shipped(t)
	chain := newAdmissionChain(t, policy, binding, extendedParams(t))

	type matrixCase struct {
		name      string
		namespace string
		principal principal
		write     write
		denied    string // the expected denial, or empty
	}
	var cases []matrixCase
	add := func(pc principalCase, namespace, where string) {
		plain := write{"creating a Service without any reserved field", false, admission.Create, "", nil, service()}
		writes := []write{plain}
		fields := map[string]string{plain.does: ""}
		for _, f := range policytest.ReservedFields {
			for _, w := range writesOf(f) {
				writes = append(writes, w)
				fields[w.does] = f.Path
			}
		}
		for _, w := range writes {
			c := matrixCase{namespace: namespace, principal: pc.p, write: w}
			if w.touches && !pc.allowed && namespace == hostNamespace {
				c.denied = policytest.PinsDenial("web", fields[w.does])
			}
			verdict := "is admitted"
			if c.denied != "" {
				verdict = "is denied"
			}
			c.name = fmt.Sprintf("%s %s %s %s", pc.who, w.does, where, verdict)
			cases = append(cases, c)
		}
	}
	for _, pc := range matrixPrincipals {
		add(pc, hostNamespace, "in a host namespace")
	}
	// The binding selects labelled namespaces only: elsewhere the policy
	// lets a tenant do anything.
	add(matrixPrincipals[0], plainNamespace, "in an unlabelled namespace")

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := chain.admit(t, request{
				principal: c.principal, namespace: c.namespace,
				operation: c.write.operation, subresource: c.write.subresource,
				old: c.write.old, new: c.write.new,
			})
			expectOutcome(t, out, c.denied)
			if len(out.warnings) != 0 {
				t.Errorf("warnings %q with validationActions [Deny]", out.warnings)
			}
		})
	}
	t.Logf("%d cases", len(cases))
}

// expectOutcome checks a denial by its exact message and its 403, or an
// admission.
func expectOutcome(t *testing.T, out outcome, denied string) {
	t.Helper()
	switch {
	case denied == "" && out.err != nil:
		t.Errorf("denied: %v", out.err)
	case denied != "" && out.err == nil:
		t.Errorf("admitted, want denied with %q", denied)
	case denied != "":
		if out.err.Error() != denied {
			t.Errorf("denied with\n  %q\nwant\n  %q", out.err.Error(), denied)
		}
		if !apierrors.IsForbidden(out.err) {
			t.Errorf("denial is not a 403 Forbidden: %#v", out.err)
		}
	}
}

func TestServicePins_Edges(t *testing.T) {
	policy, binding, params := shipped(t)
	chain := newAdmissionChain(t, policy, binding, params)
	lbIPs, pool, pinned, specIP := policytest.ReservedFields[0], policytest.ReservedFields[1], policytest.ReservedFields[6], policytest.ReservedFields[7]
	setAnnotation := func(key, value string) func(*corev1.Service) {
		return func(svc *corev1.Service) { svc.Annotations[key] = value }
	}
	for _, c := range []struct {
		name     string
		who      principal
		old, new *corev1.Service
		denied   string
	}{
		{"a tenant's write touching several reserved fields is denied naming each of them", tenant,
			service(), service(with(lbIPs, lbIPs.First), with(specIP, specIP.First), with(pinned, pinned.First)),
			policytest.PinsDenial("web", lbIPs.Path, pinned.Path, specIP.Path)},
		{"an empty value is a value: a tenant adding an empty address pool is denied", tenant,
			service(), service(with(pool, "")), policytest.PinsDenial("web", pool.Path)},
		{"a tenant emptying an address pool is denied", tenant,
			service(with(pool, pool.First)), service(with(pool, "")), policytest.PinsDenial("web", pool.Path)},
		{"annotation keys are case-sensitive, as MetalLB reads them: a tenant's metallb.io/LoadBalancerIPs is admitted", tenant,
			service(), service(setAnnotation("metallb.io/LoadBalancerIPs", "198.51.100.5")), ""},
		{"MetalLB's own metallb.io/ip-allocated-from-pool is not reserved", tenant,
			service(), service(setAnnotation("metallb.io/ip-allocated-from-pool", "public")), ""},
		{"a tenant may keep a driver's pin while replacing every other annotation", tenant,
			service(with(lbIPs, lbIPs.First), with(pinned, lbIPs.First)),
			service(with(lbIPs, lbIPs.First), with(pinned, lbIPs.First), func(svc *corev1.Service) {
				delete(svc.Annotations, "example.com/owner")
				svc.Annotations["example.com/cost-centre"] = "42"
			}), ""},
		{"the driver pins and marks a tenant's Service in one write", driver,
			service(), service(with(lbIPs, lbIPs.First), with(pinned, lbIPs.First)), ""},
		{"a user with no groups at all is judged by name: a tenant is denied", principal{name: "carol"},
			service(), service(with(pool, pool.First)), policytest.PinsDenial("web", pool.Path)},
		{"a user with no groups at all is judged by name: the driver is admitted", principal{name: driver.name},
			service(), service(with(pool, pool.First)), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			op := admission.Update
			if c.old == nil {
				op = admission.Create
			}
			expectOutcome(t, chain.admit(t, request{principal: c.who, namespace: hostNamespace, operation: op, old: c.old, new: c.new}), c.denied)
		})
	}
}

// The params' lists replace the shipped ones: a name left out is not
// allowed any more, whatever the shipped params say.
func TestServicePins_ParamsReplaceTheShippedLists(t *testing.T) {
	policy, binding, params := shipped(t)
	pool := policytest.ReservedFields[1]
	addPool := func(chain *admissionChain, who principal) outcome {
		return chain.admit(t, request{principal: who, namespace: hostNamespace, operation: admission.Update,
			old: service(), new: service(with(pool, pool.First))})
	}
	masters := principal{"admin", []string{"system:masters"}}
	operators := principal{"bob", []string{"network-operators"}}
	opsBot := principal{name: "ops-bot"}

	t.Run("the shipped params allow neither ops-bot nor network-operators", func(t *testing.T) {
		chain := newAdmissionChain(t, policy.DeepCopy(), binding.DeepCopy(), params.DeepCopy())
		expectOutcome(t, addPool(chain, opsBot), policytest.PinsDenial("web", pool.Path))
		expectOutcome(t, addPool(chain, operators), policytest.PinsDenial("web", pool.Path))
		expectOutcome(t, addPool(chain, masters), "")
		expectOutcome(t, addPool(chain, driver), "")
	})
	t.Run("params listing only network-operators and ops-bot allow them and nobody else", func(t *testing.T) {
		replaced := params.DeepCopy()
		replaced.Data = map[string]string{"allowedUsernames": "ops-bot", "allowedGroups": "network-operators"}
		chain := newAdmissionChain(t, policy.DeepCopy(), binding.DeepCopy(), replaced)
		expectOutcome(t, addPool(chain, opsBot), "")
		expectOutcome(t, addPool(chain, operators), "")
		expectOutcome(t, addPool(chain, masters), policytest.PinsDenial("web", pool.Path))
		expectOutcome(t, addPool(chain, driver), policytest.PinsDenial("web", pool.Path))
	})
	t.Run("params with no lists allow nobody", func(t *testing.T) {
		empty := params.DeepCopy()
		empty.Data = nil
		chain := newAdmissionChain(t, policy.DeepCopy(), binding.DeepCopy(), empty)
		expectOutcome(t, addPool(chain, masters), policytest.PinsDenial("web", pool.Path))
		expectOutcome(t, addPool(chain, driver), policytest.PinsDenial("web", pool.Path))
		// Untouched reserved fields still need nobody's permission.
		expectOutcome(t, chain.admit(t, request{principal: tenant, namespace: hostNamespace, operation: admission.Update,
			old: service(), new: service(otherEdits)}), "")
	})
}

// Names are separated by commas and/or newlines, with whitespace and empty
// items ignored; nothing else separates them.
func TestServicePins_ParamsListFormat(t *testing.T) {
	policy, binding, params := shipped(t)
	params.Data = map[string]string{
		"allowedUsernames": "  ops-bot ,\n\n  deploy-bot,,\nname with spaces\n",
		"allowedGroups":    "network-operators,sre\n",
	}
	chain := newAdmissionChain(t, policy, binding, params)
	pool := policytest.ReservedFields[1]
	for _, c := range []struct {
		name    string
		who     principal
		allowed bool
	}{
		{"a name before a comma is allowed, trimmed", principal{name: "ops-bot"}, true},
		{"a name after blank lines and before two commas is allowed", principal{name: "deploy-bot"}, true},
		{"a line with spaces is one name", principal{name: "name with spaces"}, true},
		{"a part of a line with spaces is no name", principal{name: "name"}, false},
		{"a group before a comma is allowed", principal{"x", []string{"network-operators"}}, true},
		{"a group after a comma is allowed", principal{"x", []string{"sre"}}, true},
		{"a group name as a user name is not allowed", principal{name: "sre"}, false},
		{"the empty user name is never allowed", principal{name: ""}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			denied := policytest.PinsDenial("web", pool.Path)
			if c.allowed {
				denied = ""
			}
			expectOutcome(t, chain.admit(t, request{principal: c.who, namespace: hostNamespace, operation: admission.Update,
				old: service(), new: service(with(pool, pool.First))}), denied)
		})
	}
}

// parameterNotFoundAction: Deny fails closed: without the params nothing
// in a host namespace is written, even a write touching no reserved field.
func TestServicePins_MissingParamsFailClosed(t *testing.T) {
	policy, binding, _ := shipped(t)
	chain := newAdmissionChain(t, policy, binding)
	edit := func(namespace string, who principal) outcome {
		return chain.admit(t, request{principal: who, namespace: namespace, operation: admission.Update,
			old: service(), new: service(otherEdits)})
	}
	for _, who := range []principal{tenant, driver} {
		out := edit(hostNamespace, who)
		if out.err == nil || !strings.Contains(out.err.Error(), "no params found for policy binding with `Deny` parameterNotFoundAction") {
			t.Errorf("%s in a host namespace without params: got %v, want the missing params named", who.name, out.err)
		}
	}
	expectOutcome(t, edit(plainNamespace, tenant), "")
}

// With validationActions [Warn, Audit] a write the policy would deny is
// admitted, and the message goes back as a warning and into the audit log.
func TestServicePins_WarnAndAuditAdmitWithAWarning(t *testing.T) {
	policy, binding, params := shipped(t)
	binding.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
	chain := newAdmissionChain(t, policy, binding, params)
	pool := policytest.ReservedFields[1]
	message := policytest.PinsMessage(pool.Path)

	out := chain.admit(t, request{principal: tenant, namespace: hostNamespace, operation: admission.Update,
		old: service(with(pool, pool.First)), new: service(with(pool, pool.Second))})
	expectOutcome(t, out, "")
	wantWarning := policytest.Warned(policytest.ServicePins) + message
	if len(out.warnings) != 1 || out.warnings[0] != wantWarning {
		t.Errorf("warnings %q, want [%q]", out.warnings, wantWarning)
	}
	audit := out.audit["validation.policy.admission.k8s.io/validation_failure"]
	if !strings.Contains(audit, message) || !strings.Contains(audit, `"validationActions":["Warn","Audit"]`) {
		t.Errorf("audit annotations %q, want the message with both actions", out.audit)
	}

	out = chain.admit(t, request{principal: driver, namespace: hostNamespace, operation: admission.Update,
		old: service(with(pool, pool.First)), new: service(with(pool, pool.Second))})
	expectOutcome(t, out, "")
	if len(out.warnings) != 0 || len(out.audit) != 0 {
		t.Errorf("the driver's write drew warnings %q and audit annotations %q", out.warnings, out.audit)
	}
}

// The shipped objects say what the rest of this package assumes.
func TestServicePins_ShippedObjects(t *testing.T) {
	policy, binding, params := shipped(t)
	if policy.Name != policies.ServicePinsName || binding.Name != policies.ServicePinsName || binding.Spec.PolicyName != policies.ServicePinsName {
		t.Errorf("names: policy %q, binding %q for %q", policy.Name, binding.Name, binding.Spec.PolicyName)
	}
	if got := binding.Spec.ValidationActions; len(got) != 1 || got[0] != admissionregistrationv1.Deny {
		t.Errorf("binding validationActions %v, want [Deny]", got)
	}
	ref := binding.Spec.ParamRef
	if ref == nil || ref.Name != params.Name || ref.Namespace != params.Namespace ||
		ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != admissionregistrationv1.DenyAction {
		t.Errorf("binding paramRef %+v does not name the params %s/%s with parameterNotFoundAction Deny", ref, params.Namespace, params.Name)
	}
	if params.Name != policies.ServicePinsName || params.Namespace != policies.ServicePinsParamsNamespace {
		t.Errorf("params %s/%s", params.Namespace, params.Name)
	}
	sel := binding.Spec.MatchResources.NamespaceSelector
	if sel == nil || len(sel.MatchLabels) != 0 || len(sel.MatchExpressions) != 1 ||
		sel.MatchExpressions[0].Key != policies.HostNamespaceLabel || sel.MatchExpressions[0].Operator != metav1.LabelSelectorOpExists {
		t.Errorf("binding namespaceSelector %+v, want %s Exists", sel, policies.HostNamespaceLabel)
	}
	if !strings.Contains(params.Data["allowedUsernames"], driver.name) {
		t.Errorf("the shipped params do not allow the driver %s", driver.name)
	}
}

// The annotations the policy reserves are the driver's: MetalLB's backend
// annotations it refuses to overwrite and its own pin marker. (The matrix
// above holds the policy to policytest.ReservedFields; this holds policytest.ReservedFields to the
// driver's code.)
func TestReservedAnnotationsAreTheDrivers(t *testing.T) {
	var got []string
	for _, f := range policytest.ReservedFields {
		if f.Annotation != "" {
			got = append(got, strings.TrimSuffix(strings.TrimPrefix(f.Path, "metadata.annotations["), "]"))
		}
	}
	want := append(slices.Clone(metallb.BackendAnnotations), metallb.AnnotationPinned)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("reserved annotations %v, the driver's %v", got, want)
	}
}
