package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cozystack/address-controller/test/proc"
)

// Component names, as passed to Options.Output.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
)

// defaultAPIServerFlags are set on kube-apiserver unless Options.APIServerFlags
// overrides them.
var defaultAPIServerFlags = map[string][]string{
	// envtest's default is 10.0.0.0/24: 256 ClusterIPs, and every
	// LoadBalancer Service takes one. Dual-stack so both families can be
	// exercised.
	"service-cluster-ip-range": {"10.96.0.0/16,fd00:10:96::/112"},
	// Every LoadBalancer Service also takes a NodePort (2,768 by default).
	// Nothing binds them here, so the range can be wide.
	"service-node-port-range": {"30000-62767"},
}

// controllers are the kube-controller-manager controllers a bare API server
// lacks and tests notice: ownerReference cascades, namespace deletion, the
// aggregated admin/edit/view ClusterRoles, and ResourceQuota usage (which
// the API server's quota admission needs, and beside which the core keeps
// its address keys).
const controllers = "garbagecollector,namespace,clusterrole-aggregation,resourcequota"

const (
	startTimeout = 90 * time.Second // per component; two control planes may start at once on 2 cores
	stopTimeout  = 20 * time.Second
	readyTimeout = 2 * time.Minute // for kube-controller-manager to take effect, unless ctx is shorter
	kcmGrace     = 10 * time.Second
)

// Options configure Start. The zero value is a complete configuration.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager.
	// Empty means BinDir().
	BinDir string

	// CRDDirectoryPaths are directories (or files) of CRDs installed before
	// Start returns; a missing path is an error. Nil means config/crd at the
	// repository root; an empty, non-nil slice installs none.
	CRDDirectoryPaths []string

	// APIServerFlags are kube-apiserver flags (name without dashes → values)
	// set in addition to this package's defaults, replacing a default of the
	// same name. The defaults widen the service CIDRs to dual-stack
	// 10.96.0.0/16,fd00:10:96::/112 and the NodePort range to 30000-62767, so
	// thousands of LoadBalancer Services fit.
	APIServerFlags map[string][]string

	// Output, if set, is called once for each component (Etcd,
	// KubeAPIServer, KubeControllerManager) and returns where its logs go.
	// Nil, or a nil writer, discards them.
	Output func(component string) io.Writer
}

// ControlPlane is a running etcd, kube-apiserver and kube-controller-manager.
type ControlPlane struct {
	// Config is an admin (group system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the same admin identity as kubeconfig file contents.
	Kubeconfig []byte

	env     *envtest.Environment
	kcm     *proc.Process
	kcmTail *proc.Tail
	tmpDir  string
	// apiPath and apiOut start kube-apiserver again (RestartAPIServer);
	// apiserver is the process it started, nil while envtest's runs.
	apiPath   string
	apiOut    io.Writer
	apiMu     sync.Mutex
	apiserver *proc.Process
	clientset kubernetes.Interface

	disarmWatchdog func()

	userMu sync.Mutex // envtest's certificate authority is not safe for concurrent use

	stopOnce sync.Once
	stopErr  error
}

// Start starts a control plane and returns once the API server serves the
// CRDs and kube-controller-manager's controllers are effective. ctx bounds
// the start only; the control plane runs until Stop.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	bins, err := findBinaries(binDir, Etcd, KubeAPIServer, KubeControllerManager)
	if err != nil {
		return nil, err
	}
	crdPaths := opts.CRDDirectoryPaths
	if crdPaths == nil {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		crdPaths = []string{filepath.Join(root, "config", "crd")}
	}
	// Asked once per component: a caller may open a file for each.
	outputs := map[string]io.Writer{}
	if opts.Output != nil {
		for _, component := range []string{Etcd, KubeAPIServer, KubeControllerManager} {
			outputs[component] = opts.Output(component)
		}
	}
	output := func(component string) io.Writer { return outputs[component] }

	cp := &ControlPlane{}
	defer func() {
		if err != nil {
			err = errors.Join(err, cp.Stop())
		}
	}()
	// All state lives here, so that Stop (or the watchdog) removes it all.
	if cp.tmpDir, err = os.MkdirTemp("", "controlplane-"); err != nil {
		return nil, err
	}
	certDir := filepath.Join(cp.tmpDir, KubeAPIServer)
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return nil, err
	}

	env := &envtest.Environment{
		BinaryAssetsDirectory:    binDir,
		CRDDirectoryPaths:        crdPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  stopTimeout,
	}
	// Explicit paths win over KUBEBUILDER_ASSETS, which may point at other
	// versions on a developer's machine.
	env.ControlPlane.Etcd = &envtest.Etcd{
		Path: bins[Etcd], DataDir: filepath.Join(cp.tmpDir, Etcd),
		Out: output(Etcd), Err: output(Etcd),
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path, api.CertDir = bins[KubeAPIServer], certDir
	api.Out, api.Err = output(KubeAPIServer), output(KubeAPIServer)
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		env.ControlPlane.KubectlPath = kubectl
	}
	args := api.Configure()
	for name, values := range defaultAPIServerFlags {
		if _, ok := opts.APIServerFlags[name]; !ok {
			args.Set(name, values...)
		}
	}
	for name, values := range opts.APIServerFlags {
		args.Set(name, values...)
	}

	cp.env, cp.apiPath, cp.apiOut = env, bins[KubeAPIServer], output(KubeAPIServer)
	cp.Config, err = env.Start()
	// Armed even after a failed start: envtest may have left processes.
	var werr error
	if cp.disarmWatchdog, werr = startWatchdog(cp.tmpDir); werr != nil {
		err = errors.Join(err, fmt.Errorf("start watchdog: %w", werr))
	}
	if err != nil {
		return nil, fmt.Errorf("start etcd and kube-apiserver: %w", err)
	}
	cp.Kubeconfig = env.KubeConfig
	if cp.clientset, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return nil, err
	}

	if err := cp.startControllerManager(bins[KubeControllerManager], output(KubeControllerManager)); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := cp.waitForControllerManager(ctx); err != nil {
		return nil, fmt.Errorf("kube-controller-manager did not take effect: %w%s", err, cp.kcmTail.Describe("its output"))
	}
	return cp, nil
}

func (c *ControlPlane) startControllerManager(path string, out io.Writer) error {
	_, kubeconfig, err := c.AddUser("system:kube-controller-manager", []string{"system:masters"})
	if err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(c.tmpDir, "kube-controller-manager.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	c.kcmTail = proc.NewTail(40)
	w := io.Writer(c.kcmTail)
	if out != nil {
		w = io.MultiWriter(c.kcmTail, out)
	}
	c.kcm, err = proc.Start(KubeControllerManager, path, []string{
		"--kubeconfig=" + kubeconfigPath,
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--secure-port=0",
		// The default (20 QPS) makes cascading deletes of thousands of
		// objects crawl; this API server is local and idle otherwise.
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
	}, w)
	return err
}

// waitForControllerManager waits until clusterrole-aggregation has filled the
// admin ClusterRole and the garbage collector has collected a dependent of a
// deleted owner: then its informers have synced and tests can rely on it.
func (c *ControlPlane) waitForControllerManager(ctx context.Context) error {
	poll := func(what string, cond wait.ConditionWithContextFunc) error {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			select {
			case <-c.kcm.Done():
				return false, fmt.Errorf("exited: %w", c.kcm.Err())
			default:
			}
			return cond(ctx)
		})
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		return nil
	}

	err := poll("the aggregated admin ClusterRole", func(ctx context.Context) (bool, error) {
		role, err := c.clientset.RbacV1().ClusterRoles().Get(ctx, "admin", metav1.GetOptions{})
		return err == nil && len(role.Rules) > 0, nil
	})
	if err != nil {
		return err
	}

	cms := c.clientset.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "controlplane-gc-probe-"},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	dependent, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		GenerateName: owner.Name + "-",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}},
	}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return poll("garbage collection", func(ctx context.Context) (bool, error) {
		_, err := cms.Get(ctx, dependent.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// AddUser provisions a client-certificate identity with the given groups and
// returns a client configuration and a kubeconfig for it. It is safe for
// concurrent use.
func (c *ControlPlane) AddUser(name string, groups []string) (*rest.Config, []byte, error) {
	c.userMu.Lock()
	defer c.userMu.Unlock()
	user, err := c.env.AddUser(envtest.User{Name: name, Groups: groups},
		&rest.Config{QPS: c.Config.QPS, Burst: c.Config.Burst})
	if err != nil {
		return nil, nil, fmt.Errorf("add user %s: %w", name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig of user %s: %w", name, err)
	}
	return user.Config(), kubeconfig, nil
}

// WriteKubeconfig writes the admin kubeconfig to path (mode 0600), creating
// its directory. The file is replaced atomically, so a kubectl reading it
// never sees half of it.
func (c *ControlPlane) WriteKubeconfig(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".kubeconfig-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.Write(c.Kubeconfig); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path) // CreateTemp already made it 0600
}

// APIServerMetrics returns kube-apiserver's /metrics in the Prometheus text
// format.
func (c *ControlPlane) APIServerMetrics(ctx context.Context) (string, error) {
	body, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("get kube-apiserver /metrics: %w", err)
	}
	return string(body), nil
}

// Stop stops kube-controller-manager, then kube-apiserver and etcd, and
// removes their data. It is safe to call more than once.
func (c *ControlPlane) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		if c.kcm != nil {
			errs = append(errs, c.kcm.Stop(kcmGrace))
		}
		c.apiMu.Lock()
		if c.apiserver != nil {
			errs = append(errs, c.apiserver.Stop(stopTimeout))
		}
		c.apiMu.Unlock()
		if c.env != nil {
			errs = append(errs, c.env.Stop())
		}
		// Disarmed only now, so it still acts if we die while stopping.
		if c.disarmWatchdog != nil {
			c.disarmWatchdog()
		}
		if c.tmpDir != "" {
			errs = append(errs, os.RemoveAll(c.tmpDir))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}
