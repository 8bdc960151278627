package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/daemon"
	"github.com/cozystack/address-controller/policies"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/proc"
)

// The controllers' identities, as the charts name them: each runs as its
// own ServiceAccount bound to the roles generated from its code.
const (
	coreNamespace = "address-controller-system"
	coreAccount   = "address-controller"
	driverAccount = "metallb-iad"
	tokenValidity = 24 * 60 * 60
)

// shipped is what the bench runs the controllers with: what the charts
// deploy (leader election, the webhooks and the service-pins policy, a
// ServiceAccount each, the binaries' default client-side limits), or with
// -unthrottled the old lab setting.
type shipped struct {
	coreKubeconfig, driverKubeconfig string
	webhooks                         *controlplane.Webhooks
	// metricsPort are the controllers' plain-HTTP metrics ports, for the
	// Go heap figures.
	metricsPort map[string]int
	// pprofPort are their pprof ports, with -pprof.
	pprofPort map[string]int
}

// prepareShipped creates the identities, installs the policies and
// prepares (without installing) the webhook configurations.
func (b *bench) prepareShipped(ctx context.Context) (*shipped, error) {
	sh := &shipped{
		coreKubeconfig:   filepath.Join(b.tmp, coreAccount+".kubeconfig"),
		driverKubeconfig: filepath.Join(b.tmp, driverAccount+".kubeconfig"),
		metricsPort:      map[string]int{},
		pprofPort:        map[string]int{},
	}
	for _, id := range []struct{ namespace, name, roles, path string }{
		{coreNamespace, coreAccount, filepath.Join(b.root, "config", "rbac", "role.yaml"), sh.coreKubeconfig},
		{driverNamespace, driverAccount, filepath.Join(b.root, "config", "rbac", "metallb-iad", "role.yaml"), sh.driverKubeconfig},
	} {
		kc, err := b.cp.ServiceAccount(ctx, id.namespace, id.name, id.roles, tokenValidity)
		if err != nil {
			return nil, fmt.Errorf("identity %s: %w", id.name, err)
		}
		if err := os.WriteFile(id.path, kc, 0o600); err != nil {
			return nil, err
		}
	}
	if err := policies.Install(ctx, b.c); err != nil {
		return nil, fmt.Errorf("installing the policies: %w", err)
	}
	wh, err := controlplane.PrepareWebhooks(filepath.Join(b.root, "config", "webhook"))
	if err != nil {
		return nil, err
	}
	// As the chart: the validating webhooks spare the core's own writes,
	// and the address defaulter an address that needs nothing of it.
	wh.AsTheChart("system:serviceaccount:" + coreNamespace + ":" + coreAccount)
	sh.webhooks = wh
	for _, name := range []string{"manager", "metallb-iad"} {
		if sh.metricsPort[name], err = freePort(); err != nil {
			return nil, err
		}
		if b.opts.pprof {
			if sh.pprofPort[name], err = freePort(); err != nil {
				return nil, err
			}
		}
	}
	return sh, nil
}

// memoryLimit is the container memory limit of each controller, by the
// name the bench starts it under.
type memoryLimit map[string]int64

// charts are the charts of the controllers, by process name.
var charts = map[string]string{"manager": "address-controller", "metallb-iad": "metallb-iad"}

// memoryLimits reads resources.limits.memory from each controller's
// chart, or takes override for both when it is set.
func memoryLimits(root, override string) (memoryLimit, error) {
	out := memoryLimit{}
	for proc, chart := range charts {
		q := override
		if q == "" {
			raw, err := os.ReadFile(filepath.Join(root, "charts", chart, "values.yaml"))
			if err != nil {
				return nil, err
			}
			var values struct {
				Resources struct {
					Limits map[string]string `json:"limits"`
				} `json:"resources"`
			}
			if err := yaml.Unmarshal(raw, &values); err != nil {
				return nil, fmt.Errorf("chart %s: %w", chart, err)
			}
			q = values.Resources.Limits["memory"]
		}
		limit, err := resource.ParseQuantity(q)
		if err != nil {
			return nil, fmt.Errorf("memory limit of %s: %q: %w", proc, q, err)
		}
		out[proc] = limit.Value()
	}
	return out, nil
}

// env is the environment proc has in a pod with its memory limit: the
// binaries derive their Go memory limit from the container's
// (daemon.GoMemoryLimit); here, where no cgroup limits them, GOMEMLIMIT
// says the same.
func (m memoryLimit) env(proc string) []string {
	return []string{fmt.Sprintf("GOMEMLIMIT=%d", daemon.GoMemoryLimit(m[proc]))}
}

// target judges proc's resident set against its container's limit: the
// figure a pod is killed at. (Go's soft limit sits below it, so a cache
// that fits never reaches it; one that does not fit passes it.)
func (m memoryLimit) target(proc string, got memory) string {
	return target(got.most() <= float64(m[proc]), "RSS at its peak ≤ "+mib(float64(m[proc]))+", its limit")
}

func (m memoryLimit) String() string {
	if m["manager"] == m["metallb-iad"] {
		return mib(float64(m["manager"]))
	}
	return fmt.Sprintf("%s (manager), %s (metallb-iad)", mib(float64(m["manager"])), mib(float64(m["metallb-iad"])))
}

// freePort is a loopback port nothing listens on now.
func freePort() (int, error) { return proc.FreePort("127.0.0.1") }

// managerArgs are the chart's flags for the manager (its Deployment's
// args), pointed at the local control plane.
func (b *bench) managerArgs(sh *shipped) []string {
	args := []string{
		"--kubeconfig=" + sh.coreKubeconfig,
		"--leader-elect=true",
		"--leader-election-namespace=" + coreNamespace,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(sh.metricsPort["manager"]),
		"--metrics-secure=false",
		"--health-probe-bind-address=0",
		"--webhook-host=" + sh.webhooks.Host,
		"--webhook-port=" + strconv.Itoa(sh.webhooks.Port),
		"--webhook-cert-dir=" + sh.webhooks.CertDir,
		"--driver-usernames=metallb.drivers.local.sdn.cozystack.io=system:serviceaccount:" + driverNamespace + ":" + driverAccount,
	}
	return append(append(args, b.extra("manager")...), b.opts.managerArgs...)
}

// driverArgs are the chart's flags for metallb-iad.
func (b *bench) driverArgs(sh *shipped, metallbNamespace string) []string {
	args := []string{
		"--kubeconfig=" + sh.driverKubeconfig,
		"--leader-elect=true",
		"--leader-election-namespace=" + driverNamespace,
		"--metallb-namespace=" + metallbNamespace,
		"--namespace=" + driverNamespace,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(sh.metricsPort["metallb-iad"]),
		"--metrics-secure=false",
		"--health-probe-bind-address=0",
	}
	return append(append(args, b.extra("metallb-iad")...), b.opts.driverArgs...)
}

// extra are the flags of -unthrottled (the shipped default sets no limit
// flag) and -pprof.
func (b *bench) extra(name string) []string {
	var args []string
	if b.opts.unthrottled {
		args = append(args, "--kube-api-qps=-1")
	}
	if port := b.shipped.pprofPort[name]; port != 0 {
		args = append(args, "--pprof-bind-address=127.0.0.1:"+strconv.Itoa(port))
	}
	return args
}

// startWebhooks waits for the manager's webhook server, installs the
// configurations and waits until the API server applies them: a claim
// created without a family (dry run) comes back defaulted.
func (b *bench) startWebhooks(ctx context.Context, sh *shipped) error {
	if err := controlplane.WaitForTLS(ctx, net.JoinHostPort(sh.webhooks.Host, strconv.Itoa(sh.webhooks.Port))); err != nil {
		return err
	}
	if err := sh.webhooks.Install(b.cp.Config); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		probe := &v1alpha1.IPAddressClaim{}
		probe.Namespace, probe.Name = coreNamespace, "webhook-probe"
		if err := b.c.Create(ctx, probe, client.DryRunAll); err == nil && probe.Spec.Family != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the claim defaulting webhook is not in effect after a minute")
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// memory is a process's resident set and Go heap at one instant, and the
// peak of its resident set since the reading before: a container's limit
// is judged at every instant, not at the end of a phase.
type memory struct {
	rss, heap, peak float64 // bytes; heap and peak negative when unknown
}

func (m memory) String() string {
	heap := "unknown"
	if m.heap >= 0 {
		heap = mib(m.heap)
	}
	s := fmt.Sprintf("RSS %s, Go heap in use %s", mib(m.rss), heap)
	if m.peak >= 0 {
		s += ", peak RSS " + mib(m.peak)
	}
	return s
}

// most is the largest resident set m knows of: its peak, or the one read.
func (m memory) most() float64 { return max(m.rss, m.peak) }

func mib(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }

// memory reads c's resident set from /proc and its Go heap from its
// metrics endpoint.
func (b *bench) memory(ctx context.Context, c *child) memory {
	m := memory{rss: processStatus(c.pid(), "VmRSS:"), heap: -1, peak: peakRSS(c.pid())}
	port := b.shipped.metricsPort[c.name]
	if port == 0 {
		return m
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return m
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				m.heap = f
			}
		}
	}
	return m
}

// peakRSS is a process's largest resident set in bytes since the last
// call (VmHWM, then reset through clear_refs; where the reset is refused,
// since the process started), -1 if unknown.
func peakRSS(pid int) float64 {
	peak := processStatus(pid, "VmHWM:")
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
	return peak
}

// processStatus is a memory line of a process's /proc status (VmRSS:,
// VmHWM:) in bytes, -1 if unknown.
func processStatus(pid int, key string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return -1
}

// profile saves c's pprof profile kind (e.g. "heap", or "profile?seconds=20"
// for CPU) as dir/<c.name>-<label>.pprof; with -pprof only. Errors are
// reported, never fatal: a profile is a help, not a figure.
func (b *bench) profile(ctx context.Context, c *child, kind, label string) {
	port := b.shipped.pprofPort[c.name]
	if port == 0 {
		return
	}
	path := filepath.Join(b.procs.dir, fmt.Sprintf("%s-%s.pprof", c.name, label))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s", port, kind), nil)
	if err == nil {
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err == nil {
			defer resp.Body.Close()
			var f *os.File
			if f, err = os.Create(path); err == nil {
				_, err = io.Copy(f, resp.Body)
				err = errors.Join(err, f.Close())
			}
		}
	}
	if err != nil {
		say("profile %s of %s: %v", kind, c.name, err)
		return
	}
	say("saved %s (go tool pprof -top %s)", path, path)
}

// profileAPIServer saves kube-apiserver's CPU profile over the next
// seconds, with -pprof: where the API server's time per bind goes.
func (b *bench) profileAPIServer(ctx context.Context, seconds int, label string) {
	if !b.opts.pprof {
		return
	}
	rc, err := rest.RESTClientFor(rawConfig(b.cp.Config))
	if err != nil {
		say("profile of kube-apiserver: %v", err)
		return
	}
	data, err := rc.Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).
		Timeout(time.Duration(seconds+30) * time.Second).DoRaw(ctx)
	if err != nil {
		say("profile of kube-apiserver: %v", err)
		return
	}
	path := filepath.Join(b.procs.dir, fmt.Sprintf("kube-apiserver-%s.pprof", label))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		say("profile of kube-apiserver: %v", err)
		return
	}
	say("saved %s (go tool pprof -top %s)", path, path)
}

// rawConfig is cfg for a client of non-resource paths.
func rawConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{}
	c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	c.QPS, c.Burst = -1, 0
	return c
}
