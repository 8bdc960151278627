package policies

import (
	"context"
	"embed"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// FS holds the policy YAML files, byte for byte.
//
//go:embed *.yaml
var FS embed.FS

// The files of metallb-iad-service-pins in FS.
const (
	ServicePinsPolicyFile  = "metallb-iad-service-pins.yaml"
	ServicePinsBindingFile = "metallb-iad-service-pins-binding.yaml"
	ServicePinsParamsFile  = "metallb-iad-service-pins-params.yaml"
)

// The files of metallb-iad-class-parameters in FS.
const (
	ClassParametersPolicyFile  = "metallb-iad-class-parameters.yaml"
	ClassParametersBindingFile = "metallb-iad-class-parameters-binding.yaml"
)

// ClassParametersName names metallb-iad-class-parameters and its binding.
const ClassParametersName = "metallb-iad-class-parameters"

// Names fixed by the shipped metallb-iad-service-pins objects.
const (
	// ServicePinsName names the policy, its binding and its params.
	ServicePinsName = "metallb-iad-service-pins"
	// ServicePinsParamsNamespace holds the params ConfigMap.
	ServicePinsParamsNamespace = "metallb-iad-system"
	// HostNamespaceLabel selects the namespaces the binding guards.
	HostNamespaceLabel = "namespace.cozystack.io/host"
)

// ServicePins is metallb-iad-service-pins as shipped.
type ServicePins struct {
	Policy  *admissionregistrationv1.ValidatingAdmissionPolicy
	Binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	Params  *corev1.ConfigMap
}

// LoadServicePins decodes the embedded policy, binding and params. Decoding
// is strict, so a misspelt or misplaced field in the YAML is an error rather
// than silently dropped.
func LoadServicePins() (*ServicePins, error) {
	var s ServicePins
	s.Policy = &admissionregistrationv1.ValidatingAdmissionPolicy{}
	s.Binding = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	s.Params = &corev1.ConfigMap{}
	for file, into := range map[string]any{
		ServicePinsPolicyFile:  s.Policy,
		ServicePinsBindingFile: s.Binding,
		ServicePinsParamsFile:  s.Params,
	} {
		if err := decode(file, into); err != nil {
			return nil, err
		}
	}
	return &s, nil
}

// ClassParameters is metallb-iad-class-parameters as shipped.
type ClassParameters struct {
	Policy  *admissionregistrationv1.ValidatingAdmissionPolicy
	Binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// LoadClassParameters decodes the embedded policy and binding, strictly.
func LoadClassParameters() (*ClassParameters, error) {
	c := ClassParameters{
		Policy:  &admissionregistrationv1.ValidatingAdmissionPolicy{},
		Binding: &admissionregistrationv1.ValidatingAdmissionPolicyBinding{},
	}
	if err := decode(ClassParametersPolicyFile, c.Policy); err != nil {
		return nil, err
	}
	if err := decode(ClassParametersBindingFile, c.Binding); err != nil {
		return nil, err
	}
	return &c, nil
}

func decode(file string, into any) error {
	b, err := FS.ReadFile(file)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// Install creates the driver's policies as shipped: service-pins with its
// binding and params (in ServicePinsParamsNamespace, which must exist), and
// class-parameters with its binding. Objects that exist are left as they are.
func Install(ctx context.Context, c client.Client) error {
	s, err := LoadServicePins()
	if err != nil {
		return err
	}
	cl, err := LoadClassParameters()
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{s.Params, s.Policy, s.Binding, cl.Policy, cl.Binding} {
		if err := c.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
	}
	return nil
}
