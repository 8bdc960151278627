package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/metallb"
	"github.com/cozystack/address-controller/test/proc"
)

// shBlock is one ```sh block of a Markdown page, under its nearest heading.
type shBlock struct{ heading, text string }

// shBlocks returns a Markdown page's ```sh blocks in order. A fence may be
// indented (a block inside a list item); its indentation is removed from the
// block's lines.
func shBlocks(page string) []shBlock {
	var blocks []shBlock
	var heading, indent string
	var block *strings.Builder
	sc := bufio.NewScanner(strings.NewReader(page))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case block != nil && trimmed == "```":
			blocks = append(blocks, shBlock{heading, block.String()})
			block = nil
		case block != nil:
			block.WriteString(strings.TrimPrefix(line, indent) + "\n")
		case trimmed == "```sh":
			block, indent = &strings.Builder{}, line[:len(line)-len(trimmed)]
		case strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	return blocks
}

// syncBuffer is a bytes.Buffer safe for a process's output and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// reader is someone following a page on a playground of the test's own:
// a shell in a directory whose .playground is that playground's, with
// bin/kubectl (built at the control plane's version) first on its PATH.
type reader struct {
	t       *testing.T
	dir     string
	path    string
	exports strings.Builder // a reader's shell keeps what the page exports
	c       client.Client
	g       Gomega
}

// newReader builds the binaries and starts the playground as `make run`
// does, but with its state and binaries in a temporary directory, so a
// developer's own playground is left alone.
func newReader(t *testing.T) *reader {
	ctrllog.SetLogger(logr.Discard())
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cpBin := controlplane.RequireBinaries(t, "kubectl", "helm", metallb.Binary)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	for pkg, name := range map[string]string{"./cmd/manager": "manager", "./cmd/metallb-iad": "metallb-iad", "./test/playground": "playground"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	state := filepath.Join(dir, ".playground")
	var out syncBuffer
	p, err := proc.Start("playground", filepath.Join(bin, "playground"), []string{"-state", state, "-bin", bin}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(time.Minute); err != nil {
			t.Errorf("stopping the playground: %v", err)
		}
		if t.Failed() {
			t.Logf("playground output:\n%s", out.String())
		}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(p.Done()).NotTo(BeClosed(), "the playground exited")
		g.Expect(out.String()).To(ContainSubstring("Playground running"))
	}).WithTimeout(3 * time.Minute).Should(Succeed())

	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(state, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &reader{t: t, dir: dir, path: cpBin + string(os.PathListSeparator) + os.Getenv("PATH"), c: c, g: g}
}

// promise is what a page promises after its block containing after.
type promise struct {
	after string
	// refusals: the block shows commands being refused, so it runs on past
	// failures, and its output must hold each of want.
	refusals bool
	want     []string
	// check, if set, checks the state through the API.
	check func()
}

// follow runs blocks as the reader's shell would, in order, and keeps each
// promise after its block; every promise must be met by some block.
func (r *reader) follow(page string, blocks []shBlock, promises []promise) {
	r.t.Helper()
	kept := make([]bool, len(promises))
	for _, b := range blocks {
		i := -1
		for j, p := range promises {
			if !kept[j] && strings.Contains(b.text, p.after) {
				i = j
				break
			}
		}
		flags := "-euo"
		if i >= 0 && promises[i].refusals {
			flags = "-uo"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", flags, "pipefail", "-c", r.exports.String()+b.text)
		cmd.Dir = r.dir
		cmd.Env = append(os.Environ(), "PATH="+r.path)
		output, err := cmd.CombinedOutput()
		cancel()
		if err != nil && (i < 0 || !promises[i].refusals) {
			r.t.Fatalf("%s, under %q:\n%s\n%v\n%s", page, b.heading, b.text, err, output)
		}
		r.t.Logf("%s, under %q:\n%s", page, b.heading, output)
		for _, line := range strings.Split(b.text, "\n") {
			if strings.HasPrefix(line, "export ") {
				r.exports.WriteString(line + "\n")
			}
		}
		if i < 0 {
			continue
		}
		kept[i] = true
		for _, w := range promises[i].want {
			r.g.Expect(string(output)).To(ContainSubstring(w), "%s, under %q", page, b.heading)
		}
		if promises[i].check != nil {
			promises[i].check()
		}
	}
	for j, p := range promises {
		if !kept[j] {
			r.t.Errorf("%s has no block containing %q", page, p.after)
		}
	}
}

// page reads a page of the repository.
func (r *reader) page(path string) []shBlock {
	root, err := controlplane.RepoRoot()
	if err != nil {
		r.t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		r.t.Fatal(err)
	}
	return shBlocks(string(data))
}

// ingress returns a Service's ingress IPs.
func (r *reader) ingress(ns, name string) func(Gomega) []string {
	return func(g Gomega) []string {
		svc := &corev1.Service{}
		g.Expect(r.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc)).To(Succeed())
		var ips []string
		for _, i := range svc.Status.LoadBalancer.Ingress {
			ips = append(ips, i.IP)
		}
		return ips
	}
}

// address returns an IPAddress.
func (r *reader) address(name string) func(Gomega) *v1alpha1.IPAddress {
	return func(g Gomega) *v1alpha1.IPAddress {
		a := &v1alpha1.IPAddress{}
		g.Expect(r.c.Get(context.Background(), client.ObjectKey{Name: name}, a)).To(Succeed())
		return a
	}
}

// claim returns an IPAddressClaim.
func (r *reader) claim(ns, name string) *v1alpha1.IPAddressClaim {
	c := &v1alpha1.IPAddressClaim{}
	r.g.Expect(r.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
	return c
}

// held waits until a placeholder of the driver holds each ip.
func (r *reader) held(ips ...string) {
	r.g.Eventually(func(g Gomega) {
		var list corev1.ServiceList
		g.Expect(r.c.List(context.Background(), &list, client.InNamespace(driverNamespace))).To(Succeed())
		var holding []string
		for _, s := range list.Items {
			for _, i := range s.Status.LoadBalancer.Ingress {
				holding = append(holding, i.IP)
			}
		}
		g.Expect(holding).To(ContainElements(ips), "placeholders in %s", driverNamespace)
	}).Should(Succeed())
}

// attachedTo waits until an address is announced for a Service.
func (r *reader) attachedTo(address, service string) {
	r.g.Eventually(func(g Gomega) {
		a := r.address(address)(g)
		g.Expect(a.Status.AssociatedTo).NotTo(BeNil())
		g.Expect(a.Status.AssociatedTo.Name).To(Equal(service))
	}).Should(Succeed())
}

// TestPlayground follows docs/playground.md on a playground as `make run`
// starts it, every sh block in order, and checks what each section
// promises.
func TestPlayground(t *testing.T) {
	r := newReader(t)
	g := r.g
	r.follow("docs/playground.md", r.page("docs/playground.md"), []promise{
		{after: "# the placeholder holding it", check: func() {
			c := r.claim("shop", "web")
			g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
			g.Expect(c.Status.Addresses).To(HaveLen(1))
			g.Expect(c.Status.Addresses[0].Address).To(Equal("198.51.100.0"))
			r.held("198.51.100.0")
		}},
		{after: "ATTACHED-TO a", check: func() { r.attachedTo("ip-198-51-100-0", "a") }},
		{after: "a none once MetalLB let go", check: func() {
			g.Eventually(r.ingress("shop", "a")).Should(BeEmpty())
			g.Expect(r.ingress("shop", "b")(g)).To(Equal([]string{"198.51.100.0"}))
		}},
		{after: "delete svc -n shop b", check: func() {
			r.held("198.51.100.0")
			g.Expect(r.address("ip-198-51-100-0")(g).Status.Phase).To(Equal(v1alpha1.AddressBound))
		}},
		{after: "ATTACHED-TO legacy", check: func() {
			g.Expect(r.ingress("shop", "legacy")(g)).To(Equal([]string{"198.51.100.5"}))
			r.attachedTo("ip-198-51-100-5", "legacy")
		}},
		{after: "=Available", check: func() {
			g.Expect(r.address("ip-198-51-100-0")(g).Status.Phase).To(Equal(v1alpha1.AddressAvailable))
			r.held("198.51.100.0")
		}},
	})
}

// TestWalkthrough follows docs/walkthrough.md ("Five minutes on the
// playground") on a playground of its own: every sh block in order,
// including the ones that show bad input and the policy refusing a tenant.
func TestWalkthrough(t *testing.T) {
	r := newReader(t)
	g := r.g
	ctx := context.Background()
	r.follow("docs/walkthrough.md", r.page("docs/walkthrough.md"), []promise{
		{after: "name: ip-203-0-113-10", check: func() {
			g.Expect(r.address("ip-203-0-113-10")(g).Status.Phase).To(Equal(v1alpha1.AddressAvailable))
		}},
		{after: "ADDRESS 203.0.113.10", want: []string{"203.0.113.10\n"}, check: func() {
			g.Expect(r.claim("default", "web").Status.Phase).To(Equal(v1alpha1.ClaimBound))
		}},
		{after: "kubectl delete ipclaim -n default web", check: func() {
			a := r.address("ip-203-0-113-10")(g)
			g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressReleased))
			g.Expect(a.Spec.ClaimRef).NotTo(BeNil())
			g.Expect(a.Spec.ClaimRef.Name).To(Equal("web"))
		}},
		{after: "/spec/claimRef", check: func() {
			g.Expect(r.address("ip-203-0-113-10")(g).Status.Phase).To(Equal(v1alpha1.AddressAvailable))
		}},
		{after: "IPv5", refusals: true, want: []string{`spec.address: Invalid value: "203.0.113.11": address is immutable`, `Unsupported value: "IPv5"`}},
		{after: "is-auto-claim-class=true", want: []string{`{"local.sdn.cozystack.io/ip-address-claim":"shop"}`, "Service\n"}, check: func() {
			err := r.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "shop"}, &v1alpha1.IPAddressClaim{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the auto-claim is gone: %v", err)
		}},
		{after: "family: Dual", check: func() {
			c := r.claim("default", "app")
			g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
			g.Expect(c.Status.Addresses).To(HaveLen(2))
			r.held("198.51.100.0", "2001:db8::")
		}},
		{after: "ipFamilyPolicy: RequireDualStack", check: func() {
			g.Expect(r.claim("default", "app").Status.Phase).To(Equal(v1alpha1.ClaimBound))
			r.held("198.51.100.0", "2001:db8::")
		}},
		{after: "team=shop", refusals: true, want: []string{"metallb-iad-service-pins", "service/web annotated"}, check: func() {
			// The tenant's pin was refused; the driver's, to the claim's
			// address, stays.
			g.Eventually(func(g Gomega) {
				c := r.claim("shop", "web")
				g.Expect(c.Status.Addresses).To(HaveLen(1))
				svc := &corev1.Service{}
				g.Expect(r.c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web"}, svc)).To(Succeed())
				g.Expect(svc.Annotations).To(HaveKeyWithValue("team", "shop"))
				g.Expect(svc.Annotations).To(HaveKeyWithValue("metallb.io/loadBalancerIPs", c.Status.Addresses[0].Address))
				g.Expect(svc.Spec.LoadBalancerIP).To(BeEmpty())
			}).Should(Succeed())
		}},
		{after: "name: db", refusals: true, want: []string{"exceeded quota: ResourceQuota addresses limits reserved.ipaddressclass.local.sdn.cozystack.io/addresses in namespace shop to 2; 1 are in use and the claim needs 2 more",
			"ipaddressclaim.local.sdn.cozystack.io/db created"}, check: func() {
			g.Expect(r.claim("shop", "db").Status.Phase).To(Equal(v1alpha1.ClaimBound))
			err := r.c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "api"}, &v1alpha1.IPAddressClaim{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Dual claim was refused: %v", err)
		}},
		{after: "keepReleasedInNamespace", check: func() {
			c := r.claim("default", "blog")
			g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
			g.Expect(c.Status.Addresses).To(HaveLen(1))
			svc := &corev1.Service{}
			g.Expect(r.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "blog"}, svc)).To(Succeed())
			g.Expect(svc.Status.LoadBalancer.Ingress).To(ContainElement(HaveField("IP", c.Status.Addresses[0].Address)))
		}},
	})
}
