package charts

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/address-controller/test/controlplane"
)

// Release namespaces and names the renders use. The defaults of both charts
// assume these namespaces.
const (
	coreChart   = "address-controller"
	driverChart = "metallb-iad"
	coreNS      = "address-controller-system"
	driverNS    = "metallb-iad-system"
)

// repoRoot returns the repository root or fails the test.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// binary returns the path of bin/<name> (make bin/<name>); it skips the test
// without one unless CI is set.
func binary(t *testing.T, name string) string {
	t.Helper()
	bin, err := controlplane.BinDir()
	p := filepath.Join(bin, name)
	if err == nil {
		_, err = os.Stat(p)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no %s: %v", name, err)
		}
		t.Skipf("no %s (make bin/%s): %v", name, name, err)
	}
	return p
}

// helmBinary returns bin/helm's path, as binary does.
func helmBinary(t *testing.T) string { return binary(t, "helm") }

// startControlPlane starts a control plane for the test with cert-manager's
// CRDs (bin/cert-manager-crds), the ServiceMonitor and PrometheusRule CRDs (bin/monitoring-crds)
// and crdDirs (relative to the repository root) installed, and returns it
// with an admin client.
func startControlPlane(ctx context.Context, t *testing.T, crdDirs ...string) (*controlplane.ControlPlane, client.Client) {
	t.Helper()
	bin, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{filepath.Join(bin, "cert-manager-crds"), filepath.Join(bin, "monitoring-crds")}
	for _, d := range crdDirs {
		paths = append(paths, filepath.Join(repoRoot(t), d))
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{CRDDirectoryPaths: paths,
		// Webhook Services resolve to their endpoints: there is no kube-proxy.
		APIServerFlags: map[string][]string{"enable-aggregator-routing": {"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cp, c
}

// helm runs bin/helm with args and returns its standard output.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	stdout, stderr, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("helm %v: %v\n%s%s", args, err, stdout, stderr)
	}
	return stdout
}

// runHelm runs bin/helm with args, away from the user's configuration and
// caches.
func runHelm(t *testing.T, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Dir = repoRoot(t)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.Bytes(), errOut.Bytes(), err
}

// render is `helm template` of charts/<chart> as release <chart> in ns,
// CRDs included, decoded into objects.
func render(t *testing.T, chart, ns string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out := helm(t, append([]string{"template", chart, filepath.Join("charts", chart), "--namespace", ns, "--include-crds"}, args...)...)
	objs, err := decode(out)
	if err != nil {
		t.Fatalf("decoding helm template %s %v: %v\n%s", chart, args, err, out)
	}
	return objs
}

// decode splits a multi-document YAML stream into objects, skipping empty
// documents.
func decode(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := string(bytes.TrimSpace(js)); s == "null" || s == "{}" {
			continue
		}
		// Unstructured's own decoding: whole numbers become int64.
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
}

// readFile reads a file relative to the repository root.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), path))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// readObject reads the single object of a YAML file (relative to the root).
func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	objs, err := decode(readFile(t, path))
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: want one object, got %d (%v)", path, len(objs), err)
	}
	return objs[0]
}

// find returns the rendered object of a kind and name, failing when there is
// not exactly one.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s %s, rendered %d", kind, name, len(found))
	}
	return found[0]
}

// hookWeight returns a Helm hook's weight and whether o is a hook at all.
func hookWeight(t *testing.T, o *unstructured.Unstructured) (int, bool) {
	t.Helper()
	a := o.GetAnnotations()
	if a["helm.sh/hook"] == "" {
		return 0, false
	}
	w, err := strconv.Atoi(cmp.Or(a["helm.sh/hook-weight"], "0"))
	if err != nil {
		t.Fatalf("%s %s: hook weight: %v", o.GetKind(), o.GetName(), err)
	}
	return w, true
}

// installOrder orders a render as `helm install` creates it: the release's
// objects as rendered, then its hooks by weight.
func installOrder(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	var release, hooks []*unstructured.Unstructured
	for _, o := range objs {
		if _, ok := hookWeight(t, o); ok {
			hooks = append(hooks, o)
		} else {
			release = append(release, o)
		}
	}
	slices.SortStableFunc(hooks, func(a, b *unstructured.Unstructured) int {
		wa, _ := hookWeight(t, a)
		wb, _ := hookWeight(t, b)
		return wa - wb
	})
	return append(release, hooks...)
}
