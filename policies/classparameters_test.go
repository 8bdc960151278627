package policies_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/cozystack/address-controller/policies"
)

// denial is what the policy says of a write of class after old (nil on
// create): "" when it does not match or admits it, else the first failed
// validation's message.
func (p *compiledPolicy) denial(t *testing.T, old, class *unstructured.Unstructured) string {
	t.Helper()
	kind := schema.GroupVersionKind{Group: "local.sdn.cozystack.io", Version: "v1alpha1", Kind: "IPAddressClass"}
	resource := kind.GroupVersion().WithResource("ipaddressclasses")
	op := admission.Create
	var oldArg runtime.Object
	if old != nil {
		op, oldArg = admission.Update, old
	}
	attrs := admission.NewAttributesRecord(class, oldArg, kind, "", class.GetName(), resource, "", op, nil, false, &user.DefaultInfo{Name: "admin"})
	versioned := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: kind}
	versioned.VersionedObject.Set(class)
	if oldArg != nil {
		versioned.VersionedOldObject.Set(oldArg)
	}
	request := plugincel.CreateAdmissionRequest(attrs, metav1.GroupVersionResource(resource), metav1.GroupVersionKind(kind))
	ctx, budget := context.Background(), int64(celconfig.RuntimeCELCostBudget)
	run := func(e plugincel.ConditionEvaluator) []plugincel.EvaluationResult {
		res, remaining, err := e.ForInput(ctx, versioned, request, plugincel.OptionalVariableBindings{}, nil, budget)
		if err != nil {
			t.Fatal(err)
		}
		budget = remaining
		return res
	}
	for _, m := range run(p.match) {
		if m.Error != nil {
			t.Fatalf("match condition: %v", m.Error)
		}
		if m.EvalResult.Value() != true {
			return ""
		}
	}
	valid, messages := run(p.validations), run(p.messages)
	for i, v := range valid {
		if v.Error != nil {
			t.Fatalf("validation %d: %v", i, v.Error)
		}
		if v.EvalResult.Value() == true {
			continue
		}
		if m := messages[i]; m.EvalResult != nil {
			if s, ok := m.EvalResult.Value().(string); ok && s != "" {
				return s
			}
		}
		return v.ExpressionAccessor.(*validating.ValidationCondition).Message
	}
	return ""
}

func class(provisioner string, parameters any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "local.sdn.cozystack.io/v1alpha1", "kind": "IPAddressClass",
		"metadata": map[string]any{"name": "public"},
		"spec":     map[string]any{"provisioner": provisioner, "reclaimPolicy": "Retain"},
	}}
	if parameters != nil {
		u.Object["spec"].(map[string]any)["parameters"] = parameters
	}
	return u
}

// The policy evaluated in Go, case by case; test/policy enforces the same
// file on a real API server.
func TestClassParameters_Evaluated(t *testing.T) {
	shipped, err := policies.LoadClassParameters()
	if err != nil {
		t.Fatal(err)
	}
	p := compilePolicy(t, shipped.Policy, false)
	const metallb = "metallb.drivers.local.sdn.cozystack.io"
	good := class(metallb, map[string]any{"pool": "p"})
	for _, tc := range []struct {
		name       string
		old, class *unstructured.Unstructured
		denied     string
	}{
		{"1 the one parameter", nil, good, ""},
		{"2 no parameters", nil, class(metallb, nil), "spec.parameters: Required value"},
		{"3 an unknown key, named", nil, class(metallb, map[string]any{"pool": "p", "note": "x"}),
			"spec.parameters: Unsupported value: unknown field(s) note; the only parameter is pool"},
		{"4 a misspelt key instead of pool", nil, class(metallb, map[string]any{"pools": "p"}), "spec.parameters: Unsupported value: unknown field(s) pools"},
		{"5 an empty pool", nil, class(metallb, map[string]any{"pool": ""}), "spec.parameters.pool: Required value"},
		{"6 a pool that is no string", nil, class(metallb, map[string]any{"pool": int64(7)}), "spec.parameters.pool: Invalid value: must be a string"},
		{"7 a pool name too long", nil, class(metallb, map[string]any{"pool": strings.Repeat("p", 254)}), "spec.parameters.pool: Too long"},
		{"7b a null pool is a missing one, as for the driver", nil, class(metallb, map[string]any{"pool": nil}), "spec.parameters.pool: Required value"},
		{"8 another provisioner's class is not judged", nil, class("static.example.com", map[string]any{"anything": "x"}), ""},
		{"9 an update breaking the parameters", good, class(metallb, map[string]any{"pool": "p", "note": "x"}), "unknown field(s) note"},
		{"10 an update leaving broken parameters as they were", class(metallb, map[string]any{"note": "x"}), class(metallb, map[string]any{"note": "x"}), ""},
		{"11 an update removing the parameters", good, class(metallb, nil), "spec.parameters: Required value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := p.denial(t, tc.old, tc.class)
			if (tc.denied == "") != (got == "") || !strings.Contains(got, tc.denied) {
				t.Errorf("denial = %q, want %q", got, tc.denied)
			}
		})
	}
}
