package policies_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"

	"github.com/cozystack/address-controller/policies"
)

// typeChecker is the API server's own checker of ValidatingAdmissionPolicy
// expressions (the one that fills status.typeChecking), here fed the static
// core/v1 schema instead of a live server's.
func typeChecker(t *testing.T) *validating.TypeChecker {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Service"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	return &validating.TypeChecker{SchemaResolver: loadStaticResolver(t), RestMapper: mapper}
}

func TestServicePins_TypeChecksAgainstServiceSchema(t *testing.T) {
	pins, err := policies.LoadServicePins()
	if err != nil {
		t.Fatal(err)
	}
	tc := typeChecker(t)

	// Check covers validations and their messageExpressions.
	for _, w := range tc.Check(pins.Policy) {
		t.Errorf("%s: %s", w.FieldRef, w.Warning)
	}
	// Variables and match conditions are checked one by one, in the same
	// context (object: Service, params: ConfigMap, every variable declared).
	ctx := tc.CreateContext(pins.Policy)
	for _, v := range pins.Policy.Spec.Variables {
		if r := tc.CheckExpression(ctx, v.Expression); len(r) != 0 {
			t.Errorf("variable %s: %s", v.Name, r)
		}
	}
	for _, m := range pins.Policy.Spec.MatchConditions {
		if r := tc.CheckExpression(ctx, m.Expression); len(r) != 0 {
			t.Errorf("matchCondition %s: %s", m.Name, r)
		}
	}
}

// Without a schema every field is dynamic and anything type-checks; these
// prove object, oldObject and params are typed as Service and ConfigMap, so
// the clean check above means something.
func TestServicePins_TypeCheckerSeesTheSchemas(t *testing.T) {
	pins, err := policies.LoadServicePins()
	if err != nil {
		t.Fatal(err)
	}
	tc := typeChecker(t)
	ctx := tc.CreateContext(pins.Policy)
	for _, c := range []struct {
		name, expression string
		clean            bool
	}{
		{"a Service has spec.loadBalancerIP", "object.spec.loadBalancerIP == ''", true},
		{"spec.externalIPs is a list of strings", "object.spec.externalIPs[0] == ''", true},
		{"...not of numbers", "object.spec.externalIPs[0] == 1", false},
		{"a Service has no spec.loadBalancerIPs", "object.spec.loadBalancerIPs == ''", false},
		{"oldObject is a Service too", "oldObject.spec.loadBalancerIPs == ''", false},
		{"annotations are strings", "object.metadata.annotations['a'] == 1", false},
		{"a ConfigMap has data", "params.data['allowedGroups'] == ''", true},
		{"a ConfigMap has no spec", "has(params.spec)", false},
		{"variables are typed", "variables.touched == 1", false},
		{"the principal variable is a bool", "variables.allowedPrincipal || false", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := tc.CheckExpression(ctx, c.expression)
			if c.clean && len(r) != 0 {
				t.Errorf("%s: want no warning, got %s", c.expression, r)
			}
			if !c.clean && len(r) == 0 {
				t.Errorf("%s: want a warning, got none", c.expression)
			}
		})
	}
}
