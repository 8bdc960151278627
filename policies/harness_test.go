package policies_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/apiserver/pkg/warning"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/featuregate"

	"github.com/cozystack/address-controller/policies"
)

// Namespaces of the in-process admission chain.
const (
	hostNamespace  = "tenant-a"  // labelled: the binding selects it
	plainNamespace = "unrelated" // not labelled
)

// admissionChain is kube-apiserver's ValidatingAdmissionPolicy admission
// plugin, running in the test process on fake clients: the same informers,
// binding matching, namespace selection, param resolution, CEL compilation
// and evaluation, and validation actions as in the API server, without one.
type admissionChain struct {
	plugin *validating.Plugin
	scheme *runtime.Scheme
}

// newAdmissionChain loads the given objects (the policy, its binding, its
// params and whatever else the case needs) plus the two namespaces, and
// returns once the plugin has compiled the policy.
func newAdmissionChain(t *testing.T, objects ...runtime.Object) *admissionChain {
	t.Helper()
	objects = append(objects,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostNamespace, Labels: map[string]string{policies.HostNamespaceLabel: ""}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plainNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policies.ServicePinsParamsNamespace}},
	)
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	scheme := clientgoscheme.Scheme
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, kind := range []string{"Service", "ConfigMap"} {
		mapper.Add(corev1.SchemeGroupVersion.WithKind(kind), meta.RESTScopeNamespace)
	}
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)

	plugin, err := validating.NewPlugin(nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	initializer.New(
		client,
		dynamicfake.NewSimpleDynamicClient(scheme),
		factory,
		// The policy asks no authorization questions.
		authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionNoOpinion, "", nil
		}),
		featuregate.NewFeatureGate(),
		compatibility.DefaultBuildEffectiveVersion(),
		stop,
		mapper,
	).Initialize(plugin)
	if err := plugin.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	// Ready: namespaces listed, policies and bindings compiled.
	if !plugin.WaitForReady() {
		t.Fatal("the admission plugin did not become ready")
	}
	chain := &admissionChain{plugin: plugin, scheme: scheme}
	// The params informer starts on first use and is given a second to
	// sync; a busy machine may need more, so retry a harmless write until
	// the params are known (or known to be missing).
	for deadline := time.Now().Add(10 * time.Second); ; {
		out := chain.admit(t, request{principal: principal{name: "probe"}, namespace: hostNamespace,
			operation: admission.Create, new: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}})
		if out.err == nil || !strings.Contains(out.err.Error(), "not yet synced") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("params never synced: %v", out.err)
		}
	}
	return chain
}

// request is one write of a Service as the API server would admit it.
type request struct {
	principal   principal
	namespace   string
	operation   admission.Operation
	subresource string
	old, new    *corev1.Service
}

type principal struct {
	name   string
	groups []string
}

// outcome is what the plugin said: the denial (nil if admitted), the
// warnings it returned and the audit annotations it recorded.
type outcome struct {
	err      error
	warnings []string
	audit    map[string]string
}

func (c *admissionChain) admit(t *testing.T, r request) outcome {
	t.Helper()
	var options runtime.Object = &metav1.CreateOptions{}
	if r.operation == admission.Update {
		options = &metav1.UpdateOptions{}
	}
	obj := r.new.DeepCopy()
	obj.Namespace = r.namespace
	var old runtime.Object
	if r.old != nil {
		o := r.old.DeepCopy()
		o.Namespace = r.namespace
		old = o
	}
	attrs := &recordingAttributes{Attributes: admission.NewAttributesRecord(
		obj, old,
		corev1.SchemeGroupVersion.WithKind("Service"),
		r.namespace, obj.Name,
		corev1.SchemeGroupVersion.WithResource("services"), r.subresource,
		r.operation, options, false,
		&user.DefaultInfo{Name: r.principal.name, Groups: r.principal.groups},
	)}
	warnings := &warningRecorder{}
	ctx, cancel := context.WithTimeout(warning.WithWarningRecorder(context.Background(), warnings), 10*time.Second)
	defer cancel()
	err := c.plugin.Validate(ctx, attrs, admission.NewObjectInterfacesFromScheme(c.scheme))
	return outcome{err: err, warnings: warnings.all(), audit: attrs.annotations()}
}

// recordingAttributes keeps the audit annotations the plugin adds, which
// the API server would write to the audit log.
type recordingAttributes struct {
	admission.Attributes
	mu    sync.Mutex
	added map[string]string
}

func (a *recordingAttributes) AddAnnotation(key, value string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.added == nil {
		a.added = map[string]string{}
	}
	a.added[key] = value
	return a.Attributes.AddAnnotation(key, value)
}

func (a *recordingAttributes) annotations() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.added
}

type warningRecorder struct {
	mu   sync.Mutex
	list []string
}

func (w *warningRecorder) AddWarning(_, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// shipped returns fresh copies of the shipped policy, binding and params.
func shipped(t *testing.T) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, *corev1.ConfigMap) {
	t.Helper()
	pins, err := policies.LoadServicePins()
	if err != nil {
		t.Fatal(err)
	}
	return pins.Policy, pins.Binding, pins.Params
}
