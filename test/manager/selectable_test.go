package manager

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/proc"
)

// TestManagerRefusesAnAPIServerWithoutSelectableFields: an API server that
// drops the IPAddress CRD's selectableFields (before Kubernetes 1.31) would
// refuse every read the core makes past its cache, and no claim would ever
// bind; the manager says so and exits instead of running.
func TestManagerRefusesAnAPIServerWithoutSelectableFields(t *testing.T) {
	controlplane.RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, _ := start(ctx, t, []string{crdsWithoutSelectableFields(t)})

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p, err := proc.Start("manager", buildManager(t, dir), []string{
		"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--webhook-port=0",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatalf("the manager is still running:\n%s", out.String())
	}
	if p.Err() == nil {
		t.Fatalf("the manager exited 0:\n%s", out.String())
	}
	if want := "does not select IPAddresses by spec.className"; !strings.Contains(out.String(), want) {
		t.Fatalf("the manager's output does not say %q:\n%s", want, out.String())
	}
}

// crdsWithoutSelectableFields writes our CRDs into a directory with the
// selectableFields taken out, as an older API server keeps them.
func crdsWithoutSelectableFields(t *testing.T) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs: %v", err)
	}
	dir := t.TempDir()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd unstructured.Unstructured
		if err := yaml.Unmarshal(data, &crd.Object); err != nil {
			t.Fatal(err)
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			delete(v.(map[string]any), "selectableFields")
		}
		if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
			t.Fatal(err)
		}
		if data, err = yaml.Marshal(crd.Object); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
