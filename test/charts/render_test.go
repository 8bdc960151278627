package charts

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/address-controller/test/controlplane"
)

func TestLint(t *testing.T) {
	for _, chart := range []string{coreChart, driverChart} {
		dir := filepath.Join("charts", chart)
		helm(t, "lint", "--strict", dir)
		helm(t, "lint", "--strict", dir, "-f", filepath.Join(dir, "values-cozystack.yaml"))
	}
	helm(t, "lint", "--strict", filepath.Join("charts", driverChart), "--set", "vapOnly=true")
	helm(t, "lint", "--strict", filepath.Join("charts", coreChart),
		"--set", "certManager.enabled=false,webhook.certSecretName=webhook-tls,webhook.caBundle=Zm9v")
	helm(t, "lint", "--strict", filepath.Join("charts", coreChart), "--set", "certManager.install=true")
}

// Bad values fail the render with a message naming the value, before
// anything reaches a cluster.
func TestBadValuesNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name, chart, set, want string
	}{
		{"1 a misspelt value", coreChart, "certManager.enable=true", "at '/certManager': additional properties 'enable' not allowed"},
		{"2 no certificate source", coreChart, "certManager.enabled=false", "webhook.certSecretName is required when certManager.enabled is false"},
		{"2 a certificate but no CA to verify it", coreChart, "certManager.enabled=false,webhook.certSecretName=webhook-tls", "webhook.caBundle is required when certManager.enabled is false"},
		{"3 cert-manager installed but not used", coreChart, "certManager.install=true,certManager.enabled=false", "certManager.install needs certManager.enabled"},
		{"4 negative replicas", coreChart, "replicas=-1", "at '/replicas'"},
		{"4 no replica of the core, whose webhooks fail closed", coreChart, "replicas=0", "at '/replicas'"},
		{"5 an unknown pull policy", driverChart, "image.pullPolicy=Sometimes", "at '/image/pullPolicy'"},
		{"6 an unknown validation action", driverChart, "admissionPolicy.validationActions={Block}", "at '/admissionPolicy/validationActions/0'"},
		{"7 an empty validation action", driverChart, "admissionPolicy.validationActions={}", "at '/admissionPolicy/validationActions/0'"},
		{"8 a driver entry the wrong way round", coreChart, "driverUsernames={system:serviceaccount:m:m=metallb.example.com}", "at '/driverUsernames/0'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := runHelm(t, "template", tc.chart, filepath.Join("charts", tc.chart), "--set", tc.set)
			if err == nil || !strings.Contains(string(stderr), tc.want) {
				t.Errorf("helm template --set %s: err %v, stderr %q; want an error naming %q", tc.set, err, stderr, tc.want)
			}
		})
	}
}

// With more than one replica, each chart's PodDisruptionBudget lets a drain
// take one at a time, and selects exactly the Deployment's pods.
func TestPodDisruptionBudgets(t *testing.T) {
	for _, r := range []struct{ chart, ns string }{{coreChart, coreNS}, {driverChart, driverNS}} {
		objs := render(t, r.chart, r.ns)
		pdb := find(t, objs, "PodDisruptionBudget", r.chart)
		podLabels, _, _ := unstructured.NestedStringMap(find(t, objs, "Deployment", r.chart).Object, "spec", "template", "metadata", "labels")
		selector, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
		for k, v := range selector {
			if podLabels[k] != v {
				t.Errorf("%s: the PodDisruptionBudget selects %s=%s, the pods have %v", r.chart, k, v, podLabels)
			}
		}
		if m, _, _ := unstructured.NestedInt64(pdb.Object, "spec", "maxUnavailable"); m != 1 || len(selector) == 0 {
			t.Errorf("%s: maxUnavailable %d, selector %v", r.chart, m, selector)
		}
		for _, o := range render(t, r.chart, r.ns, "--set", "replicas=1") {
			if o.GetKind() == "PodDisruptionBudget" {
				t.Errorf("%s: one replica, yet a PodDisruptionBudget", r.chart)
			}
		}
	}
}

// The core's replicas serve the webhooks every claim write needs: by
// default they prefer different nodes, and a terminating one keeps serving
// until its endpoint is gone (a value for affinity replaces the default).
func TestWebhookReplicasStayReachable(t *testing.T) {
	dep := find(t, render(t, coreChart, coreNS), "Deployment", coreChart)
	terms, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
	podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
	if len(terms) != 1 {
		t.Fatalf("podAntiAffinity terms = %v", terms)
	}
	term := terms[0].(map[string]any)["podAffinityTerm"].(map[string]any)
	selector, _, _ := unstructured.NestedStringMap(term, "labelSelector", "matchLabels")
	if term["topologyKey"] != "kubernetes.io/hostname" || len(selector) == 0 {
		t.Errorf("podAffinityTerm = %v", term)
	}
	for k, v := range selector {
		if podLabels[k] != v {
			t.Errorf("the anti-affinity selects %s=%s, the pods have %v", k, v, podLabels)
		}
	}
	if grace, _, _ := unstructured.NestedInt64(dep.Object, "spec", "template", "spec", "terminationGracePeriodSeconds"); grace < 5+30 {
		t.Errorf("terminationGracePeriodSeconds %d: the preStop sleep and a 30 s graceful shutdown do not fit", grace)
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if sleep, _, _ := unstructured.NestedInt64(containers[0].(map[string]any), "lifecycle", "preStop", "sleep", "seconds"); sleep <= 0 {
		t.Errorf("the manager has no preStop sleep: %v", containers[0].(map[string]any)["lifecycle"])
	}
	dep = find(t, render(t, coreChart, coreNS, "--set", "affinity.podAntiAffinity=null,affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1"), "Deployment", coreChart)
	if a, _, _ := unstructured.NestedMap(dep.Object, "spec", "template", "spec", "affinity"); a["podAntiAffinity"] != nil || a["nodeAffinity"] == nil {
		t.Errorf("a value for affinity: %v", a)
	}
}

// Both charts run the one image the Dockerfile builds, each its own binary.
func TestOneImageTwoBinaries(t *testing.T) {
	images := map[string]bool{}
	for chart, ns := range map[string]string{coreChart: coreNS, driverChart: driverNS} {
		containers, _, _ := unstructured.NestedSlice(find(t, render(t, chart, ns), "Deployment", chart).Object, "spec", "template", "spec", "containers")
		c := containers[0].(map[string]any)
		images[c["image"].(string)] = true
		if cmd := c["command"].([]any); len(cmd) != 1 || cmd[0] != "/"+map[string]string{coreChart: "manager", driverChart: "metallb-iad"}[chart] {
			t.Errorf("%s runs %v", chart, cmd)
		}
	}
	if len(images) != 1 {
		t.Errorf("the charts run %d images: %v", len(images), images)
	}
}

// A mirror's reference, by digest, given whole as image (as a package's
// single image value passes it) is run as it is, in either chart.
func TestImageAsOneReference(t *testing.T) {
	const ref = "mirror.example/cozystack/address-controller:main-90e65ca@sha256:74e4c7cf63f730ebe61527fdcd2b06e1bca2c383a66522dd4734aab9e66a9331"
	for chart, ns := range map[string]string{coreChart: coreNS, driverChart: driverNS} {
		containers, _, _ := unstructured.NestedSlice(find(t, render(t, chart, ns, "--set", "image="+ref), "Deployment", chart).Object,
			"spec", "template", "spec", "containers")
		c := containers[0].(map[string]any)
		if c["image"] != ref || c["imagePullPolicy"] != nil {
			t.Errorf("%s runs %v (pull policy %v), want %s as given", chart, c["image"], c["imagePullPolicy"], ref)
		}
	}
}

// rules returns an object's rules field.
func rules(t *testing.T, o *unstructured.Unstructured) []any {
	t.Helper()
	r, ok, err := unstructured.NestedSlice(o.Object, "rules")
	if err != nil || !ok {
		t.Fatalf("%s %s has no rules (%v)", o.GetKind(), o.GetName(), err)
	}
	return r
}

// The charts' ClusterRoles and Roles grant exactly what controller-gen
// generates from each binary's RBAC markers: the ClusterRole cluster-wide,
// the Role (leader election, the leader's Event, the driver's placeholders)
// in the release namespace.
func TestRolesMatchGenerated(t *testing.T) {
	for _, tc := range []struct{ chart, ns, generated string }{
		{coreChart, coreNS, "config/rbac/role.yaml"},
		{driverChart, driverNS, "config/rbac/metallb-iad/role.yaml"},
	} {
		objs := render(t, tc.chart, tc.ns)
		clusterRoles, roles, err := controlplane.ReadRoles(filepath.Join(repoRoot(t), tc.generated))
		if err != nil {
			t.Fatal(err)
		}
		if len(clusterRoles) != 1 || len(roles) != 1 {
			t.Fatalf("%s: want one ClusterRole and one Role, got %d and %d", tc.generated, len(clusterRoles), len(roles))
		}
		for kind, want := range map[string][]rbacv1.PolicyRule{"ClusterRole": clusterRoles[0].Rules, "Role": roles[0].Rules} {
			o := find(t, objs, kind, tc.chart)
			raw, err := json.Marshal(rules(t, o))
			if err != nil {
				t.Fatal(err)
			}
			var got []rbacv1.PolicyRule
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("charts/%s's %s rules differ from %s's:\n%v\n%v", tc.chart, kind, tc.generated, got, want)
			}
			if kind == "Role" && o.GetNamespace() != tc.ns {
				t.Errorf("charts/%s's Role is in %q, want the release namespace %q", tc.chart, o.GetNamespace(), tc.ns)
			}
		}
	}
}

// Least privilege, as docs/operating.md states it: no role of either chart
// names a wildcard or reads Secrets (the webhook certificate reaches the core
// as a mounted volume, not through the API).
func TestRolesHaveNoWildcardsOrSecrets(t *testing.T) {
	for _, r := range []struct{ chart, ns string }{{coreChart, coreNS}, {driverChart, driverNS}} {
		roles := 0
		for _, o := range render(t, r.chart, r.ns) {
			if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
				continue
			}
			roles++
			for _, rule := range rules(t, o) {
				for _, field := range []string{"apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"} {
					values, _, _ := unstructured.NestedStringSlice(rule.(map[string]any), field)
					if slices.Contains(values, "*") || field == "resources" && slices.Contains(values, "secrets") {
						t.Errorf("%s %s grants %s %v", o.GetKind(), o.GetName(), field, values)
					}
				}
			}
		}
		if roles == 0 {
			t.Errorf("%s rendered no roles", r.chart)
		}
	}
}

// The charts' webhooks are config/webhook/manifests.yaml's but for
// clientConfig, which names the chart's Service, the validating ones'
// matchConditions, which spare the core's own ServiceAccount, and the
// address defaulter's, which spares an address that carries the
// protection finalizer already.
func TestWebhooksMatchGenerated(t *testing.T) {
	notTheCore := []any{map[string]any{
		"name":       "not-the-core",
		"expression": `request.userInfo.username != "system:serviceaccount:` + coreNS + `:address-controller"`,
	}}
	lacksProtection := []any{map[string]any{
		"name": controlplane.LacksProtection.Name, "expression": controlplane.LacksProtection.Expression,
	}}
	objs := render(t, coreChart, coreNS)
	generated, err := decode(readFile(t, "config/webhook/manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range generated {
		got := find(t, objs, want.GetKind(), coreChart)
		if ann := got.GetAnnotations()["cert-manager.io/inject-ca-from"]; ann != coreNS+"/address-controller-ca" {
			t.Errorf("%s: inject-ca-from = %q", want.GetKind(), ann)
		}
		gotHooks, _, _ := unstructured.NestedSlice(got.Object, "webhooks")
		wantHooks, _, _ := unstructured.NestedSlice(want.Object, "webhooks")
		if len(gotHooks) != len(wantHooks) {
			t.Fatalf("%s: %d webhooks, config/webhook has %d", want.GetKind(), len(gotHooks), len(wantHooks))
		}
		for i := range wantHooks {
			g, w := gotHooks[i].(map[string]any), wantHooks[i].(map[string]any)
			svc := g["clientConfig"].(map[string]any)["service"].(map[string]any)
			if svc["name"] != "address-controller-webhook" || svc["namespace"] != coreNS || svc["port"] != int64(443) {
				t.Errorf("%s: clientConfig.service = %v", g["name"], svc)
			}
			if want := w["clientConfig"].(map[string]any)["service"].(map[string]any)["path"]; svc["path"] != want {
				t.Errorf("%s: path %v, want %v", g["name"], svc["path"], want)
			}
			delete(g, "clientConfig")
			delete(w, "clientConfig")
			var conditions any
			switch {
			case want.GetKind() == "ValidatingWebhookConfiguration":
				conditions = notTheCore
			case g["name"] == controlplane.AddressDefaulter:
				conditions = lacksProtection
			}
			if conditions != nil {
				if !reflect.DeepEqual(g["matchConditions"], conditions) {
					t.Errorf("%s: matchConditions = %v, want %v", g["name"], g["matchConditions"], conditions)
				}
				delete(g, "matchConditions")
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("webhook %d of %s differs from config/webhook:\n%v\n%v", i, want.GetKind(), g, w)
			}
		}
	}
}

// With default values (release metallb-iad in metallb-iad-system) the
// service-pins and class-parameters objects equal policies/'s files, bar
// the chart's labels.
func TestServicePinsDefaultsMatchFiles(t *testing.T) {
	objs := render(t, driverChart, driverNS)
	for _, file := range []string{"metallb-iad-service-pins.yaml", "metallb-iad-service-pins-binding.yaml", "metallb-iad-service-pins-params.yaml",
		"metallb-iad-class-parameters.yaml", "metallb-iad-class-parameters-binding.yaml"} {
		want := readObject(t, filepath.Join("policies", file))
		got := find(t, objs, want.GetKind(), want.GetName())
		got = got.DeepCopy()
		got.SetLabels(nil)
		if !reflect.DeepEqual(got.Object, want.Object) {
			t.Errorf("rendered %s differs from policies/%s:\n%v\n%v", want.GetKind(), file, got.Object, want.Object)
		}
	}
}

func TestServicePinsValues(t *testing.T) {
	objs := render(t, driverChart, driverNS, "--set", "admissionPolicy.validationActions={Warn,Audit}")
	for _, name := range []string{"metallb-iad-service-pins", "metallb-iad-class-parameters"} {
		actions, _, _ := unstructured.NestedStringSlice(find(t, objs, "ValidatingAdmissionPolicyBinding", name).Object, "spec", "validationActions")
		if !reflect.DeepEqual(actions, []string{"Warn", "Audit"}) {
			t.Errorf("%s validationActions = %v, want [Warn Audit]", name, actions)
		}
	}

	objs = render(t, driverChart, "cozy-metallb-iad", "-f", "charts/metallb-iad/values-cozystack.yaml",
		"--set", "admissionPolicy.namespaceLabel=example.com/tenant,admissionPolicy.allowedGroups={admins}")
	binding := find(t, objs, "ValidatingAdmissionPolicyBinding", "metallb-iad-service-pins")
	if ns, _, _ := unstructured.NestedString(binding.Object, "spec", "paramRef", "namespace"); ns != "cozy-metallb-iad" {
		t.Errorf("paramRef.namespace = %q", ns)
	}
	exprs, _, _ := unstructured.NestedSlice(binding.Object, "spec", "matchResources", "namespaceSelector", "matchExpressions")
	if len(exprs) != 1 || exprs[0].(map[string]any)["key"] != "example.com/tenant" {
		t.Errorf("namespaceSelector = %v", exprs)
	}
	params := find(t, objs, "ConfigMap", "metallb-iad-service-pins")
	if params.GetNamespace() != "cozy-metallb-iad" {
		t.Errorf("params in %q", params.GetNamespace())
	}
	data, _, _ := unstructured.NestedStringMap(params.Object, "data")
	if want := map[string]string{
		"allowedUsernames": "system:serviceaccount:cozy-metallb-iad:metallb-iad\n",
		"allowedGroups":    "admins\n",
	}; !reflect.DeepEqual(data, want) {
		t.Errorf("params = %q, want %q", data, want)
	}
	args := containerArgs(t, find(t, objs, "Deployment", driverChart))
	for _, want := range []string{"--metallb-namespace=cozy-metallb", "--namespace=cozy-metallb-iad", "--leader-election-namespace=cozy-metallb-iad"} {
		if !slices.Contains(args, want) {
			t.Errorf("driver args %v lack %s", args, want)
		}
	}

	objs = render(t, driverChart, driverNS, "--set", "vapOnly=true")
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	if len(objs) != 5 {
		t.Errorf("vapOnly rendered %v, want the two policies, their bindings and service-pins' params", kinds)
	}
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ConfigMap"} {
		find(t, objs, kind, "metallb-iad-service-pins")
	}
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		find(t, objs, kind, "metallb-iad-class-parameters")
	}

	// A list of usernames adds to the driver's own ServiceAccount: naming
	// an operator's bot must not lock the driver out of its own pins. With
	// vapOnly the release runs no driver, and the list is all.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "admissionPolicy.allowedUsernames={ops-bot}"}, "system:serviceaccount:cozy-metallb-iad:metallb-iad\nops-bot\n"},
		{[]string{"--set", "admissionPolicy.allowedUsernames={system:serviceaccount:cozy-metallb-iad:metallb-iad,ops-bot}"},
			"system:serviceaccount:cozy-metallb-iad:metallb-iad\nops-bot\n"},
		{[]string{"--set", "vapOnly=true,admissionPolicy.allowedUsernames={system:serviceaccount:elsewhere:metallb-iad}"},
			"system:serviceaccount:elsewhere:metallb-iad\n"},
	} {
		objs := render(t, driverChart, "cozy-metallb-iad", append([]string{"-f", "charts/metallb-iad/values-cozystack.yaml"}, tc.args...)...)
		got, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "metallb-iad-service-pins").Object, "data", "allowedUsernames")
		if got != tc.want {
			t.Errorf("%v: allowedUsernames = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestCoreValues(t *testing.T) {
	objs := render(t, coreChart, "cozy-address-controller", "-f", "charts/address-controller/values-cozystack.yaml")
	args := containerArgs(t, find(t, objs, "Deployment", coreChart))
	for _, want := range []string{
		"--leader-elect", "--leader-election-namespace=cozy-address-controller", "--metrics-bind-address=:8443",
		"--health-probe-bind-address=:8081", "--webhook-port=9443", "--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs",
		"--driver-usernames=metallb.drivers.local.sdn.cozystack.io=system:serviceaccount:cozy-metallb-iad:metallb-iad",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("core args %v lack %s", args, want)
		}
	}
	for name, label := range map[string]string{
		"address-controller-claims-edit": "rbac.cozystack.io/aggregate-to-tenant-admin",
		"address-controller-claims-view": "rbac.cozystack.io/aggregate-to-tenant-view",
	} {
		role := find(t, objs, "ClusterRole", name)
		r := rules(t, role)
		if len(r) != 1 || !reflect.DeepEqual(r[0].(map[string]any)["resources"], []any{"ipaddressclaims"}) {
			t.Errorf("%s rules = %v", name, r)
		}
		if role.GetLabels()[label] != "true" {
			t.Errorf("%s labels = %v: Cozystack's tenant roles aggregate by %s", name, role.GetLabels(), label)
		}
	}

	objs = render(t, coreChart, coreNS, "--set", "certManager.enabled=false,webhook.certSecretName=webhook-tls,webhook.caBundle=Zm9v,serviceMonitor.enabled=true")
	for _, o := range objs {
		if o.GetAPIVersion() == "cert-manager.io/v1" {
			t.Errorf("certManager.enabled=false rendered %s %s", o.GetKind(), o.GetName())
		}
	}
	endpoints, _, _ := unstructured.NestedSlice(find(t, objs, "ServiceMonitor", coreChart).Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["honorLabels"] != true {
		t.Errorf("ServiceMonitor endpoints = %v: the series' namespace label is the tenant's (honorLabels)", endpoints)
	}
	hooks, _, _ := unstructured.NestedSlice(find(t, objs, "ValidatingWebhookConfiguration", coreChart).Object, "webhooks")
	for _, h := range hooks {
		if ca := h.(map[string]any)["clientConfig"].(map[string]any)["caBundle"]; ca != "Zm9v" {
			t.Errorf("caBundle = %v", ca)
		}
	}
	vols, _, _ := unstructured.NestedSlice(find(t, objs, "Deployment", coreChart).Object, "spec", "template", "spec", "volumes")
	if len(vols) != 1 || vols[0].(map[string]any)["secret"].(map[string]any)["secretName"] != "webhook-tls" {
		t.Errorf("volumes = %v", vols)
	}
}

// certManager.install adds cert-manager, at the version Chart.yaml pins, and
// turns the Issuer and Certificate into hooks that run after cert-manager's
// own post-install check; without it nothing of cert-manager is rendered.
func TestCertManagerDependency(t *testing.T) {
	type chart struct {
		Version      string
		Dependencies []struct{ Name, Version, Condition string }
	}
	var core, vendored chart
	for path, into := range map[string]*chart{
		"charts/address-controller/Chart.yaml":                     &core,
		"charts/address-controller/charts/cert-manager/Chart.yaml": &vendored,
	} {
		if err := yaml.Unmarshal(readFile(t, path), into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if len(core.Dependencies) != 1 || core.Dependencies[0].Name != "cert-manager" || core.Dependencies[0].Condition != "certManager.install" {
		t.Fatalf("dependencies = %+v", core.Dependencies)
	}
	version := core.Dependencies[0].Version
	if vendored.Version != version {
		t.Fatalf("vendored cert-manager chart is %s, Chart.yaml depends on %s: make generate", vendored.Version, version)
	}

	for _, o := range render(t, coreChart, coreNS) {
		if _, ok := o.GetLabels()["app.kubernetes.io/instance"]; ok && strings.Contains(o.GetName(), "cert-manager") {
			t.Errorf("certManager.install=false rendered %s %s", o.GetKind(), o.GetName())
		}
	}

	objs := render(t, coreChart, coreNS, "--set", "certManager.install=true")
	images := 0
	lastOther := math.MinInt
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() != coreChart {
			images++
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if image := containers[0].(map[string]any)["image"].(string); !strings.HasSuffix(image, ":"+version) {
				t.Errorf("%s runs %s, want cert-manager %s", o.GetName(), image, version)
			}
		}
		if w, ok := hookWeight(t, o); ok && o.GetAPIVersion() != "cert-manager.io/v1" && strings.Contains(o.GetAnnotations()["helm.sh/hook"], "post-install") {
			lastOther = max(lastOther, w)
		}
	}
	if images != 3 {
		t.Errorf("want cert-manager's controller, cainjector and webhook Deployments, rendered %d", images)
	}
	find(t, objs, "CustomResourceDefinition", "certificates.cert-manager.io")
	for _, kind := range []string{"Issuer", "Certificate"} {
		for _, o := range objs {
			if o.GetKind() != kind {
				continue
			}
			w, ok := hookWeight(t, o)
			if !ok || o.GetAnnotations()["helm.sh/hook"] != "post-install,post-upgrade" || w <= lastOther {
				t.Errorf("%s %s: annotations %v, want a post-install,post-upgrade hook weighted above %d", kind, o.GetName(), o.GetAnnotations(), lastOther)
			}
		}
	}
}

func containerArgs(t *testing.T, deploy *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("%d containers", len(containers))
	}
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	return args
}

// The optional PrometheusRules carry the alerts the docs recommend, on
// metrics the controllers export; they are off by default.
func TestPrometheusRule(t *testing.T) {
	for _, tc := range []struct {
		chart, ns string
		alerts    map[string]string // alert: the series it reads
	}{
		{coreChart, coreNS, map[string]string{
			"IPAddressClassExhausted":          "address_controller_class_exhausted",
			"IPAddressClassNearlyExhausted":    "address_controller_class_nearly_exhausted",
			"IPAddressClaimsWaiting":           "address_controller_claims_waiting",
			"IPAddressQuotaFull":               "address_controller_quota_used_addresses",
			"IPAddressClaimLost":               "address_controller_claims",
			"IPAddressConflict":                "address_controller_addresses",
			"IPAddressLost":                    "address_controller_addresses",
			"AddressControllerReconcileErrors": `controller_runtime_reconcile_errors_total{job="address-controller-metrics"}`,
		}},
		{driverChart, driverNS, map[string]string{
			"MetalLBClassNotReady":         "metallb_iad_class_ready",
			"MetalLBClassPoolNearlyFull":   "metallb_iad_class_addresses",
			"MetalLBDriverReconcileErrors": `controller_runtime_reconcile_errors_total{job="metallb-iad-metrics"}`,
		}},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			for _, o := range render(t, tc.chart, tc.ns) {
				if o.GetKind() == "PrometheusRule" {
					t.Fatal("a PrometheusRule by default")
				}
			}
			if tc.chart == driverChart {
				for _, o := range render(t, tc.chart, tc.ns, "--set", "prometheusRule.enabled=true,vapOnly=true") {
					if o.GetKind() == "PrometheusRule" {
						t.Fatal("a PrometheusRule with vapOnly, where no driver runs")
					}
				}
			}
			rule := find(t, render(t, tc.chart, tc.ns, "--set", "prometheusRule.enabled=true"), "PrometheusRule", tc.chart)
			groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
			if len(groups) != 1 {
				t.Fatalf("groups: %v", groups)
			}
			rules, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
			alerts := map[string]string{}
			for _, r := range rules {
				alerts[r.(map[string]any)["alert"].(string)] = r.(map[string]any)["expr"].(string)
			}
			if len(alerts) != len(tc.alerts) {
				t.Errorf("alerts %v, want those of %v", slices.Sorted(maps.Keys(alerts)), slices.Sorted(maps.Keys(tc.alerts)))
			}
			for alert, series := range tc.alerts {
				if !strings.Contains(alerts[alert], series) {
					t.Errorf("alert %s: expr %q does not read %s", alert, alerts[alert], series)
				}
				for _, err := range groupingLabels(alerts[alert]) {
					t.Errorf("alert %s: %v", alert, err)
				}
			}
		})
	}
}

// seriesLabels are the labels of the series the alerts read, as
// TestManagerBinary scrapes the core's from the binary.
var seriesLabels = map[string][]string{
	"address_controller_class_exhausted":        {"class"},
	"address_controller_class_nearly_exhausted": {"class"},
	"address_controller_claims_waiting":         {"namespace", "class", "reason"},
	"address_controller_claims":                 {"phase", "class"},
	"address_controller_addresses":              {"phase", "class"},
	"address_controller_quota_used_addresses":   {"namespace", "quota", "resource"},
	"address_controller_quota_hard_addresses":   {"namespace", "quota", "resource"},
	"metallb_iad_class_ready":                   {"class"},
	"metallb_iad_class_addresses":               {"class", "pool", "family", "state"},
	// controller-runtime's, with the scrape's job (the metrics Service's
	// name, as prometheus-operator sets it).
	"controller_runtime_reconcile_errors_total": {"controller", "job"},
}

var (
	grouping   = regexp.MustCompile(`\b(by|on) \(([^)]*)\)`)
	seriesName = regexp.MustCompile(`\b(address_controller|metallb_iad|controller_runtime)_[a-z_]+`)
)

// groupingLabels checks that an expression groups and joins only on labels
// its series have: a label under `by (…)` on every series the aggregated
// group reads, a label under `on (…)` on every series of the expression. A
// label a series lacks matches nothing, and the alert never fires.
func groupingLabels(expr string) []error {
	var errs []error
	for _, m := range grouping.FindAllStringSubmatchIndex(expr, -1) {
		scope := expr
		if expr[m[2]:m[3]] == "by" {
			scope = parenthesised(expr[m[1]:])
		}
		for _, label := range strings.Split(expr[m[4]:m[5]], ",") {
			label = strings.TrimSpace(label)
			for _, name := range seriesName.FindAllString(scope, -1) {
				labels, known := seriesLabels[name]
				if !known {
					errs = append(errs, fmt.Errorf("series %s: labels unknown to the test", name))
				} else if !slices.Contains(labels, label) {
					errs = append(errs, fmt.Errorf("%s (%s) on %s, which has only %v", expr[m[2]:m[3]], label, name, labels))
				}
			}
		}
	}
	return errs
}

// parenthesised is the first balanced (…) group of s.
func parenthesised(s string) string {
	depth, start := 0, strings.IndexByte(s, '(')
	if start < 0 {
		return ""
	}
	for i := start; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return s[start : i+1]
			}
		}
	}
	return s[start:]
}

// The serving certificate is issued by a CA of the chart's own, which keeps
// its key across renewals: what cainjector injects (the serving Secret's
// ca.crt, the CA) outlives the serving certificate's renewals, so the
// webhooks stay reachable while the replicas reload a renewed certificate.
func TestServingCertificateFromAStableCA(t *testing.T) {
	objs := render(t, coreChart, coreNS)
	serving := find(t, objs, "Certificate", coreChart+"-serving-cert")
	issuerName, _, _ := unstructured.NestedString(serving.Object, "spec", "issuerRef", "name")
	caSecret, _, _ := unstructured.NestedString(find(t, objs, "Issuer", issuerName).Object, "spec", "ca", "secretName")
	var ca *unstructured.Unstructured
	for _, o := range objs {
		if name, _, _ := unstructured.NestedString(o.Object, "spec", "secretName"); o.GetKind() == "Certificate" && name == caSecret && caSecret != "" {
			ca = o
		}
	}
	if ca == nil {
		t.Fatalf("no Certificate writes %q, the Secret of the serving certificate's Issuer %s", caSecret, issuerName)
	}
	isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA")
	rotation, _, _ := unstructured.NestedString(ca.Object, "spec", "privateKey", "rotationPolicy")
	caIssuer, _, _ := unstructured.NestedString(ca.Object, "spec", "issuerRef", "name")
	selfSigned, found, _ := unstructured.NestedMap(find(t, objs, "Issuer", caIssuer).Object, "spec", "selfSigned")
	if !isCA || rotation != "Never" || !found || selfSigned == nil {
		t.Errorf("CA Certificate %s: isCA %v, rotationPolicy %q, issuer %s self-signed %v", ca.GetName(), isCA, rotation, caIssuer, found)
	}
	// Injected from the CA's own Secret, which a CA renewal updates; the
	// serving Secret's ca.crt keeps the CA it was issued with.
	for _, o := range objs {
		if strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			if got, want := o.GetAnnotations()["cert-manager.io/inject-ca-from"], coreNS+"/"+ca.GetName(); got != want {
				t.Errorf("%s %s injects from %q, want %q", o.GetKind(), o.GetName(), got, want)
			}
		}
	}
}
