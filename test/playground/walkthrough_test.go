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

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/proc"
)

// section is one "## " section of a Markdown page and its sh blocks.
type section struct {
	title  string
	blocks []string
}

// shSections splits a Markdown page into sections and their ```sh blocks;
// blocks before the first heading belong to a section titled "".
func shSections(page string) []section {
	sections := []section{{}}
	var block *strings.Builder
	sc := bufio.NewScanner(strings.NewReader(page))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case block != nil && line == "```":
			last := &sections[len(sections)-1]
			last.blocks = append(last.blocks, block.String())
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		case line == "```sh":
			block = &strings.Builder{}
		case strings.HasPrefix(line, "## "):
			sections = append(sections, section{title: strings.TrimPrefix(line, "## ")})
		}
	}
	return sections
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

// TestWalkthrough runs docs/playground.md as a reader would: the playground
// as `make run` starts it, then every sh block of the page, in order, with
// bash and a kubectl built at the control plane's version (bin/kubectl).
// After each section it checks what the section promises.
func TestWalkthrough(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cpBin, err := controlplane.BinDir()
	if err == nil {
		_, err = os.Stat(filepath.Join(cpBin, "kubectl"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no kubectl: %v", err)
		}
		t.Skipf("no kubectl (make bin/kubectl): %v", err)
	}

	// The page's readers are in a directory where .playground is the
	// playground's; here that is a temporary one, so a developer's own
	// playground is left alone.
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
	checks := walkthroughChecks(g, c)

	page, err := os.ReadFile(filepath.Join(root, "docs", "playground.md"))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	// A reader's shell keeps what the page exports.
	var exports strings.Builder
	for _, s := range shSections(string(page)) {
		for _, block := range s.blocks {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", exports.String()+block)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+cpBin+string(os.PathListSeparator)+os.Getenv("PATH"))
			output, err := cmd.CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("section %q:\n%s\n%v\n%s", s.title, block, err, output)
			}
			t.Logf("section %q:\n%s", s.title, output)
			ran++
			for _, line := range strings.Split(block, "\n") {
				if strings.HasPrefix(line, "export ") {
					exports.WriteString(line + "\n")
				}
			}
		}
		if check, ok := checks[s.title]; ok {
			check()
			delete(checks, s.title)
		}
	}
	if len(checks) > 0 {
		t.Errorf("docs/playground.md lacks the sections %v", keys(checks))
	}
	if ran < 8 {
		t.Errorf("ran %d blocks of docs/playground.md", ran)
	}
}

// walkthroughChecks returns, per section of docs/playground.md, what that
// section promises, checked through the API.
func walkthroughChecks(g Gomega, c client.Client) map[string]func() {
	ctx := context.Background()
	ingress := func(ns, name string) func(Gomega) []string {
		return func(g Gomega) []string {
			svc := &corev1.Service{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc)).To(Succeed())
			var ips []string
			for _, i := range svc.Status.LoadBalancer.Ingress {
				ips = append(ips, i.IP)
			}
			return ips
		}
	}
	address := func(name string) func(Gomega) *v1alpha1.IPAddress {
		return func(g Gomega) *v1alpha1.IPAddress {
			a := &v1alpha1.IPAddress{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, a)).To(Succeed())
			return a
		}
	}
	placeholderHolds := func(ip string) {
		g.Eventually(func(g Gomega) {
			var list corev1.ServiceList
			g.Expect(c.List(ctx, &list, client.InNamespace(driverNamespace))).To(Succeed())
			held := false
			for _, s := range list.Items {
				for _, i := range s.Status.LoadBalancer.Ingress {
					held = held || i.IP == ip
				}
			}
			g.Expect(held).To(BeTrue(), "a placeholder in %s holds %s", driverNamespace, ip)
		}).Should(Succeed())
	}
	return map[string]func(){
		"Reserve": func() {
			claim := &v1alpha1.IPAddressClaim{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web"}, claim)).To(Succeed())
			g.Expect(claim.Status.Phase).To(Equal(v1alpha1.ClaimBound))
			g.Expect(claim.Status.Addresses).To(HaveLen(1))
			g.Expect(claim.Status.Addresses[0].Address).To(Equal("198.51.100.0"))
			placeholderHolds("198.51.100.0")
		},
		"Attach": func() {
			g.Eventually(func(g Gomega) {
				g.Expect(address("ip-198-51-100-0")(g).Status.AssociatedTo).NotTo(BeNil())
				g.Expect(address("ip-198-51-100-0")(g).Status.AssociatedTo.Name).To(Equal("a"))
			}).Should(Succeed())
		},
		"Move": func() {
			g.Eventually(ingress("shop", "a")).Should(BeEmpty())
			g.Expect(ingress("shop", "b")(g)).To(Equal([]string{"198.51.100.0"}))
		},
		"Detach": func() {
			placeholderHolds("198.51.100.0")
			g.Expect(address("ip-198-51-100-0")(g).Status.Phase).To(Equal(v1alpha1.AddressBound))
		},
		"Adopt an address a Service already holds": func() {
			g.Expect(ingress("shop", "legacy")(g)).To(Equal([]string{"198.51.100.5"}))
			g.Eventually(func(g Gomega) {
				a := address("ip-198-51-100-5")(g)
				g.Expect(a.Status.AssociatedTo).NotTo(BeNil())
				g.Expect(a.Status.AssociatedTo.Name).To(Equal("legacy"))
			}).Should(Succeed())
		},
		"Release": func() {
			g.Expect(address("ip-198-51-100-0")(g).Status.Phase).To(Equal(v1alpha1.AddressAvailable))
			placeholderHolds("198.51.100.0")
		},
	}
}

func keys(m map[string]func()) []string {
	var l []string
	for k := range m {
		l = append(l, k)
	}
	return l
}
