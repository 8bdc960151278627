package policies_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/cozystack/address-controller/policies/policytest"
)

// compiledPolicy is a policy compiled as kube-apiserver's
// ValidatingAdmissionPolicy plugin compiles it (same environment, variables
// composed lazily, match conditions and validations with the authorizer,
// messages without), kept apart so the cost of an evaluation can be read.
type compiledPolicy struct {
	match, validations, messages plugincel.ConditionEvaluator
}

// compilePolicy compiles policy; hasParams says whether it declares params.
func compilePolicy(t *testing.T, policy *admissionregistrationv1.ValidatingAdmissionPolicy, hasParams bool) *compiledPolicy {
	t.Helper()
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		t.Fatal(err)
	}
	withAuthz := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	for _, v := range policy.Spec.Variables {
		if r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, withAuthz, environment.StoredExpressions); r.Error != nil {
			t.Fatalf("variable %s: %v", v.Name, r.Error)
		}
	}
	var match, validations, messages []plugincel.ExpressionAccessor
	for _, m := range policy.Spec.MatchConditions {
		match = append(match, &matchconditions.MatchCondition{Name: m.Name, Expression: m.Expression})
	}
	for _, v := range policy.Spec.Validations {
		validations = append(validations, &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason})
		messages = append(messages, &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression})
	}
	return &compiledPolicy{
		match:       compiler.CompileCondition(match, withAuthz, environment.StoredExpressions),
		validations: compiler.CompileCondition(validations, withAuthz, environment.StoredExpressions),
		messages:    compiler.CompileCondition(messages, plugincel.OptionalVariableDeclarations{HasParams: hasParams}, environment.StoredExpressions),
	}
}

// evaluate runs the validations and then their messages on one write, as
// the plugin does, and returns the results and the cost of both.
func (p *compiledPolicy) evaluate(t *testing.T, who principal, before, after *corev1.Service, params *corev1.ConfigMap) (valid []plugincel.EvaluationResult, messages []plugincel.EvaluationResult, cost int64) {
	t.Helper()
	op := admission.Update
	var oldObj *corev1.Service
	if before != nil {
		oldObj = before.DeepCopy()
		oldObj.Namespace = hostNamespace
	} else {
		op = admission.Create
	}
	newObj := after.DeepCopy()
	newObj.Namespace = hostNamespace
	kind := corev1.SchemeGroupVersion.WithKind("Service")
	resource := corev1.SchemeGroupVersion.WithResource("services")
	var oldArg runtime.Object
	if oldObj != nil {
		oldArg = oldObj
	}
	attrs := admission.NewAttributesRecord(newObj, oldArg, kind, hostNamespace, newObj.Name, resource, "", op, nil, false,
		&user.DefaultInfo{Name: who.name, Groups: who.groups})
	versioned, err := admission.NewVersionedAttributes(attrs, kind, admission.NewObjectInterfacesFromScheme(clientgoscheme.Scheme))
	if err != nil {
		t.Fatal(err)
	}
	request := plugincel.CreateAdmissionRequest(attrs, metav1.GroupVersionResource(resource), metav1.GroupVersionKind(kind))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostNamespace}}
	ctx := context.Background()

	budget := int64(celconfig.RuntimeCELCostBudget)
	valid, remaining, err := p.validations.ForInput(ctx, versioned, request,
		plugincel.OptionalVariableBindings{VersionedParams: params}, ns, budget)
	if err != nil {
		t.Fatal(err)
	}
	messages, remaining, err = p.messages.ForInput(ctx, versioned, request,
		plugincel.OptionalVariableBindings{VersionedParams: params}, ns, remaining)
	if err != nil {
		t.Fatal(err)
	}
	return valid, messages, budget - remaining
}

// names returns n distinct names of the given length.
func names(prefix string, n, length int) []string {
	out := make([]string, n)
	for i := range out {
		name := fmt.Sprintf("%s-%d-", prefix, i)
		out[i] = name + strings.Repeat("x", length-len(name))
	}
	return out
}

// The API server bounds an evaluation by RuntimeCELCostBudget per binding
// and PerCallLimit per expression (a variable is an expression of its own),
// failing the write when either is spent. The inputs below are the largest
// the API lets a write have (256 KiB of annotations, all of them reserved
// and each changed in its last byte, so every comparison reads to the end)
// against generous params and a principal in many groups, none allowed, so
// that every expression runs; an ordinary write is shown for scale.
func TestServicePins_RuntimeCostWithinBudget(t *testing.T) {
	policy, _, params := shipped(t)
	compiled := compilePolicy(t, policy, true)

	ordinary := func() (before, after *corev1.Service) {
		pool := policytest.ReservedFields[1]
		return service(with(pool, pool.First)), service(with(pool, pool.Second))
	}
	largest := func() (before, after *corev1.Service) {
		before, after = service(), service()
		before.Annotations, after.Annotations = map[string]string{}, map[string]string{}
		const annotationLimit = 256 * 1024 // the API's total for keys and values
		reserved := policytest.ReservedFields[:7]
		per := annotationLimit / len(reserved)
		for _, f := range reserved {
			key := strings.TrimSuffix(strings.TrimPrefix(f.Path, "metadata.annotations["), "]")
			value := strings.Repeat("a", per-len(key)-1)
			before.Annotations[key] = value + "a"
			after.Annotations[key] = value + "b"
		}
		before.Spec.LoadBalancerIP, after.Spec.LoadBalancerIP = "198.51.100.1", "198.51.100.2"
		// A thousand external IPs, the last one changed: far more than any
		// Service names (the API sets no limit but the object's size).
		for i := range 1000 {
			ip := fmt.Sprintf("100.64.%d.%d", i/256, i%256)
			before.Spec.ExternalIPs, after.Spec.ExternalIPs = append(before.Spec.ExternalIPs, ip), append(after.Spec.ExternalIPs, ip)
		}
		after.Spec.ExternalIPs[999] = "100.65.0.1"
		return before, after
	}
	bigParams := params.DeepCopy()
	bigParams.Data = map[string]string{
		"allowedUsernames": strings.Join(names("user", 1000, 64), "\n"),
		"allowedGroups":    strings.Join(names("group", 1000, 64), "\n"),
	}

	for _, c := range []struct {
		name   string
		write  func() (before, after *corev1.Service)
		who    principal
		params *corev1.ConfigMap
		max    int64
	}{
		{"an ordinary tenant write costs under a thousandth of the budget", ordinary, tenant, params, celconfig.RuntimeCELCostBudget / 1000},
		{"the largest write by a principal in 200 groups against 1000 allowed names and 1000 allowed groups costs less than one expression may",
			largest, principal{"alice", names("tenant-group", 200, 64)}, bigParams, celconfig.PerCallLimit},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, after := c.write()
			valid, messages, cost := compiled.evaluate(t, c.who, before, after, c.params)
			for _, r := range append(valid, messages...) {
				if r.Error != nil {
					t.Fatalf("evaluation failed: %v", r.Error)
				}
			}
			if len(valid) != 1 || valid[0].EvalResult.Value() != false {
				t.Fatalf("validation result %v, want false (denied)", valid[0].EvalResult)
			}
			if msg, _ := messages[0].EvalResult.Value().(string); !strings.HasSuffix(msg, " may only be set, changed or removed by the metallb-iad driver or a cluster administrator") {
				t.Errorf("message %q", msg)
			}
			t.Logf("cost %d of %d (PerCallLimit %d per expression)", cost, celconfig.RuntimeCELCostBudget, celconfig.PerCallLimit)
			if cost > c.max {
				t.Errorf("cost %d exceeds %d", cost, c.max)
			}
		})
	}
}
