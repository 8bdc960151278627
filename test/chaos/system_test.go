package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/policies"
	"github.com/cozystack/address-controller/test/controlplane"
	mlb "github.com/cozystack/address-controller/test/metallb"
	"github.com/cozystack/address-controller/test/proc"
)

// Names and identities, as the charts install them.
const (
	coreNS, coreSA     = "address-controller-system", "address-controller"
	driverNS, driverSA = "metallb-iad-system", "metallb-iad"
	coreLease          = "address-controller.local.sdn.cozystack.io"
	driverLease        = "metallb-iad.local.sdn.cozystack.io"
	tenantNS           = "chaos"
	tenantUser         = "chaos-tenant"
	tenantGroup        = "chaos-tenants"
	metalLBName        = "metallb"
)

// system is what runs: a control plane with MetalLB's controller, the
// shipped binaries as their ServiceAccounts, the core's webhooks behind a
// balancer (the webhook Service of a chart) and the driver's policies. A
// supervisor starts again any binary that exits on its own, as a kubelet
// restarts a container.
type system struct {
	t      *testing.T
	ctx    context.Context
	cp     *controlplane.ControlPlane
	bin    string // the control plane's and MetalLB's binaries
	dir    string // the built binaries and kubeconfigs
	logDir string // every process's output, one file each
	admin  client.WithWatch
	tenant client.Client
	// apiServer is the URL the binaries reach the API server at, and
	// apiCA its CA: the API server itself, or a proxy in front of it
	// (crash points).
	apiServer string
	apiCA     []byte

	mu       sync.Mutex
	procs    map[string]*process
	stopping bool
	// restarts counts, per process, the exits the supervisor restarted.
	restarts map[string]int
}

// process is one binary the system runs.
type process struct {
	name string
	path string
	args []string
	// lease is the Lease it elects its leader through ("" for none);
	// metrics, the plain-HTTP address of its metrics.
	lease, metrics string
	log            *os.File
	p              *proc.Process
	// down: stopped on purpose; the supervisor leaves it down.
	down   bool
	paused bool
}

// options shape the system.
type options struct {
	managers, drivers int
	leaderElection    bool
	// proxy, if set, is put between the binaries and the API server: it
	// returns the URL they are given instead, and its CA.
	proxy func(apiServer string, cfg *rest.Config) (string, []byte)
}

// newSystem starts everything and returns once the webhooks and policies
// are installed and every binary has started.
func newSystem(ctx context.Context, t *testing.T, o options) *system {
	bin := controlplane.RequireBinaries(t, mlb.Binary)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	logDir, err := os.MkdirTemp("", "chaos-logs-")
	if err != nil {
		t.Fatal(err)
	}
	s := &system{t: t, ctx: ctx, bin: bin, dir: t.TempDir(), logDir: logDir, procs: map[string]*process{}, restarts: map[string]int{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("every process's output is kept in %s", logDir)
			return
		}
		_ = os.RemoveAll(logDir)
	})
	s.cp, err = controlplane.Start(ctx, controlplane.Options{
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd"), mlb.CRDDir(bin)},
		Output:            func(component string) io.Writer { return s.logFile(component) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	if s.admin, err = client.NewWithWatch(s.cp.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	s.apiServer = s.cp.Config.Host
	if o.proxy != nil {
		s.apiServer, s.apiCA = o.proxy(s.cp.Config.Host, s.cp.Config)
	}
	s.setupTenant(scheme)

	s.startMetalLB()
	for _, name := range []string{"manager", "metallb-iad"} {
		s.build(root, name)
	}
	core := s.identity(root, coreNS, coreSA, filepath.Join("config", "rbac", "role.yaml"))
	driver := s.identity(root, driverNS, driverSA, filepath.Join("config", "rbac", "metallb-iad", "role.yaml"))
	if err := policies.Install(ctx, s.admin); err != nil {
		t.Fatal(err)
	}
	wh, err := controlplane.PrepareWebhooks(filepath.Join(root, "config", "webhook"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wh.Cleanup() })
	// As the chart: the validating webhooks spare the core's own writes,
	// and the address defaulter an address that needs nothing of it.
	wh.AsTheChart("system:serviceaccount:" + coreNS + ":" + coreSA)
	var backends []string
	for i := range o.managers {
		port := freePort(t)
		backends = append(backends, net.JoinHostPort(wh.Host, port))
		s.run(fmt.Sprintf("manager-%d", i), filepath.Join(s.dir, "manager"), coreLease, o.leaderElection, core,
			"--leader-election-namespace="+coreNS, "--webhook-host="+wh.Host, "--webhook-port="+port, "--webhook-cert-dir="+wh.CertDir)
	}
	for i := range o.drivers {
		s.run(fmt.Sprintf("driver-%d", i), filepath.Join(s.dir, "metallb-iad"), driverLease, o.leaderElection, driver,
			"--leader-election-namespace="+driverNS, "--namespace="+driverNS, "--metallb-namespace="+mlb.Namespace)
	}
	if len(backends) > 0 {
		b, err := newBalancer(net.JoinHostPort(wh.Host, strconv.Itoa(wh.Port)), backends)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.close)
		for _, be := range backends {
			if err := controlplane.WaitForTLS(ctx, be); err != nil {
				t.Fatal(err)
			}
		}
		if err := wh.Install(s.cp.Config); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// logFile opens name's log in logDir, appending across restarts.
func (s *system) logFile(name string) *os.File {
	f, err := os.OpenFile(filepath.Join(s.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = f.Close() })
	return f
}

// setupTenant creates the tenant's namespace, guarded by the service-pins
// policy as a tenant's is, and lets the tenant write claims and Services
// there, and nothing else.
func (s *system) setupTenant(scheme *apiruntime.Scheme) {
	ctx := s.ctx
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS, Labels: map[string]string{policies.HostNamespaceLabel: tenantNS}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "tenant"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"ipaddressclaims"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"*"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "tenant"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: tenantGroup}}},
	} {
		if err := s.admin.Create(ctx, obj); err != nil {
			s.t.Fatal(err)
		}
	}
	var err error
	if s.tenant, err = client.New(controlplane.Impersonating(s.cp.Config, tenantUser, tenantGroup), client.Options{Scheme: scheme}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *system) build(root, name string) {
	cmd := exec.Command("go", "build", "-o", filepath.Join(s.dir, name), "./cmd/"+name)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("building %s: %v\n%s", name, err, out)
	}
}

// identity is a kubeconfig of the ServiceAccount bound to roleFile's
// roles, reaching the API server at s.apiServer.
func (s *system) identity(root, ns, sa, roleFile string) string {
	kc, err := s.cp.ServiceAccount(s.ctx, ns, sa, filepath.Join(root, roleFile), 24*3600)
	if err != nil {
		s.t.Fatal(err)
	}
	if s.apiServer != s.cp.Config.Host {
		cfg, err := clientcmd.Load(kc)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, c := range cfg.Clusters {
			c.Server, c.CertificateAuthorityData = s.apiServer, s.apiCA
		}
		if kc, err = clientcmd.Write(*cfg); err != nil {
			s.t.Fatal(err)
		}
	}
	path := filepath.Join(s.dir, sa+".kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// run starts a binary of ours under the supervisor, with the driver's and
// core's decisions in its debug log and its metrics on a free port.
func (s *system) run(name, path, lease string, elect bool, kubeconfig string, args ...string) {
	pr := &process{name: name, path: path, metrics: "127.0.0.1:" + freePort(s.t), log: s.logFile(name)}
	if elect {
		pr.lease = lease
	}
	pr.args = append([]string{"--kubeconfig=" + kubeconfig, "--leader-elect=" + strconv.FormatBool(elect),
		"--metrics-bind-address=" + pr.metrics, "--metrics-secure=false", "--health-probe-bind-address=0", "--zap-log-level=debug"}, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs[name] = pr
	s.startLocked(pr)
}

func (s *system) startMetalLB() {
	if err := mlb.Prepare(s.ctx, s.admin); err != nil {
		s.t.Fatal(err)
	}
	kubeconfig := filepath.Join(s.dir, "metallb.kubeconfig")
	if err := s.cp.WriteKubeconfig(kubeconfig); err != nil {
		s.t.Fatal(err)
	}
	pr := &process{name: metalLBName, path: filepath.Join(s.bin, mlb.Binary), args: mlb.Args(kubeconfig), log: s.logFile(metalLBName)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs[metalLBName] = pr
	s.startLocked(pr)
}

// startLocked starts pr and supervises it: an exit nobody asked for (a
// lost lease makes a binary exit) is followed by a start a second later.
func (s *system) startLocked(pr *process) {
	fmt.Fprintf(pr.log, "=== %s start\n", time.Now().Format(time.RFC3339Nano))
	p, err := proc.Start(pr.name, pr.path, pr.args, pr.log)
	if err != nil {
		s.t.Fatal(err)
	}
	pr.p, pr.down, pr.paused = p, false, false
	go func() {
		<-p.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		if pr.p != p || pr.down || s.stopping {
			return
		}
		fmt.Fprintf(pr.log, "=== %s exited on its own: %v\n", time.Now().Format(time.RFC3339Nano), p.Err())
		s.restarts[pr.name]++
		pr.down = true
		time.AfterFunc(time.Second, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if pr.p == p && !s.stopping {
				s.startLocked(pr)
			}
		})
	}()
}

// kill sends SIGKILL to name and leaves it down until start.
func (s *system) kill(name string) {
	s.mu.Lock()
	pr := s.procs[name]
	pr.down = true
	p := pr.p
	s.mu.Unlock()
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	_ = p.Stop(0)
	fmt.Fprintf(pr.log, "=== %s kill -9\n", time.Now().Format(time.RFC3339Nano))
}

// start starts name again after kill.
func (s *system) start(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pr := s.procs[name]; pr.down && !s.stopping {
		s.startLocked(pr)
	}
}

// pause stops name with SIGSTOP: it holds its connections and believes
// what it believed, until resume.
func (s *system) pause(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.procs[name]
	pr.paused = true
	_ = syscall.Kill(-pr.p.Pid(), syscall.SIGSTOP)
	fmt.Fprintf(pr.log, "=== %s SIGSTOP\n", time.Now().Format(time.RFC3339Nano))
}

func (s *system) resume(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.procs[name]
	pr.paused = false
	_ = syscall.Kill(-pr.p.Pid(), syscall.SIGCONT)
	fmt.Fprintf(pr.log, "=== %s SIGCONT\n", time.Now().Format(time.RFC3339Nano))
}

// leader is the process of names leading through its Lease: the one
// whose metrics report leader_election_master_status 1. The Lease's holder
// identity is the host name and a random suffix, the same for every
// process on this machine, so the metrics tell them apart. "" while none
// leads (an election is under way).
func (s *system) leader(names ...string) string {
	for _, name := range names {
		s.mu.Lock()
		pr := s.procs[name]
		skip := pr.down || pr.paused || pr.lease == ""
		s.mu.Unlock()
		if !skip && leads(pr.metrics, pr.lease) {
			return name
		}
	}
	return ""
}

func leads(addr, lease string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	want := fmt.Sprintf("leader_election_master_status{name=%q} 1", lease)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if sc.Text() == want {
			return true
		}
	}
	return false
}

// stop stops every process: paused ones are resumed first, so that they
// can exit.
func (s *system) stop() {
	s.mu.Lock()
	s.stopping = true
	procs := make([]*process, 0, len(s.procs))
	for _, pr := range s.procs {
		procs = append(procs, pr)
	}
	s.mu.Unlock()
	for _, pr := range procs {
		if pr.paused {
			_ = syscall.Kill(-pr.p.Pid(), syscall.SIGCONT)
		}
		if pr.p != nil {
			_ = pr.p.Stop(5 * time.Second)
		}
	}
	_ = s.cp.Stop()
}

// names are the processes whose names start with prefix, sorted.
func (s *system) names(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name := range s.procs {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func freePort(t *testing.T) string {
	p, err := proc.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(p)
}

// placeholder reports whether svc is a placeholder of the driver.
func placeholder(svc *corev1.Service) bool {
	return svc.Namespace == driverNS && svc.Labels[metallb.LabelAddress] != ""
}
