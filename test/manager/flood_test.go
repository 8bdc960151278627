package manager

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/core/webhook"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/proc"
)

// floodLimit is the peak resident memory the manager may reach under the
// flood: the charts' memory limit is 256 MiB, and the manager must stay
// clear of it with room for its caches. (Measured here: 98 MiB with the
// budgets, 876 MiB without; the margin is for the garbage collector's
// timing on a loaded machine.)
const floodLimit = 200 << 20

// TestManagerBinary_AdmissionFlood sends the webhook server what anyone who
// can reach its port could: 50 admission requests of just under 7 MiB at
// once, each an IPAddress update whose old and new objects carry a large
// annotation (both are decoded). The manager must stay well under its
// memory limit, answer every request (or turn it away as too many), and
// still admit an ordinary request afterwards.
func TestManagerBinary_AdmissionFlood(t *testing.T) {
	g := NewWithT(t)
	controlplane.RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, _ := start(ctx, t, nil)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	g.Expect(cp.WriteKubeconfig(kubeconfig)).To(Succeed())
	wh, err := controlplane.PrepareWebhooks() // a certificate and a port; nothing installed
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = wh.Cleanup() })

	var out bytes.Buffer
	p, err := proc.Start("manager", buildManager(t, dir), []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--webhook-host=" + wh.Host,
		"--webhook-port=" + strconv.Itoa(wh.Port),
		"--webhook-cert-dir=" + wh.CertDir,
		"--core-username=core",
	}, &out)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("manager output:\n%s", out.String())
		}
	})
	url := "https://" + net.JoinHostPort(wh.Host, strconv.Itoa(wh.Port)) + webhook.PathValidateAddress
	small := addressReview(t, 0)
	g.Eventually(func() int { return post(url, small) }, time.Minute, 100*time.Millisecond).Should(Equal(http.StatusOK))
	before := memory(t, p.Pid(), "VmRSS")

	large := addressReview(t, webhook.MaxRequestBytes-64<<10)
	codes := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			code := post(url, large)
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	peak := memory(t, p.Pid(), "VmHWM")
	t.Logf("manager RSS: %d MiB before, peak %d MiB under 50 parallel requests of %d MiB; answers by status: %v",
		before>>20, peak>>20, len(large)>>20, codes)
	g.Expect(peak).To(BeNumerically("<", floodLimit), "peak RSS")
	for code := range codes {
		g.Expect(code).To(BeElementOf(http.StatusOK, http.StatusTooManyRequests), "every request answered or turned away")
	}
	g.Expect(codes[http.StatusOK]).To(BeNumerically(">", 0), "some of the flood served")
	g.Expect(post(url, small)).To(Equal(http.StatusOK), "an ordinary request admitted after the flood")

	// Three senders that declare the largest body and never send it: two
	// hold the large budget until the body deadline, the third waits for
	// it. An ordinary request is admitted meanwhile, not queued behind them.
	addr := net.JoinHostPort(wh.Host, strconv.Itoa(wh.Port))
	for range 3 {
		stall(t, "", addr, webhook.PathValidateAddress, webhook.MaxRequestBytes)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	g.Expect(post(url, small)).To(Equal(http.StatusOK), "an ordinary request admitted while large bodies stall")
	t.Logf("an ordinary request beside three stalled large ones took %s", time.Since(start).Round(time.Millisecond))

	// Twenty senders from another address that declare 1 MiB, a small
	// body, and never send it: that address holds half the small budget
	// at most, and its other requests wait apart from everyone else's.
	for range 20 {
		stall(t, "127.0.0.2", addr, webhook.PathValidateAddress, 1<<20)
	}
	time.Sleep(200 * time.Millisecond)
	start = time.Now()
	g.Expect(post(url, small)).To(Equal(http.StatusOK), "an ordinary request admitted while small bodies stall from another address")
	t.Logf("an ordinary request beside twenty stalled small ones from another address took %s", time.Since(start).Round(time.Millisecond))
}

// stall opens a connection from local (any when empty) to the webhook
// server at addr and sends the headers of a POST to path declaring a body
// of size, and no body; the connection closes with the test.
func stall(t *testing.T, local, addr, path string, size int) {
	t.Helper()
	d := &net.Dialer{}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	conn, err := tls.DialWithDialer(d, "tcp", addr, insecure.Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, addr, size); err != nil {
		t.Fatal(err)
	}
}

// addressReview is an AdmissionReview of an IPAddress update whose objects
// carry an annotation making the body about size bytes.
func addressReview(t *testing.T, size int) []byte {
	t.Helper()
	a := v1alpha1.IPAddress{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "IPAddress"},
		ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-1", Annotations: map[string]string{"note": strings.Repeat("x", size/2)}},
		Spec:       v1alpha1.IPAddressSpec{Address: "192.0.2.1", ClassName: "public", Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}},
	}
	raw, err := json.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "flood",
			Kind:      metav1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: "v1alpha1", Kind: "IPAddress"},
			Resource:  metav1.GroupVersionResource{Group: v1alpha1.GroupVersion.Group, Version: "v1alpha1", Resource: "ipaddresses"},
			Name:      a.Name,
			Operation: admissionv1.Update,
			UserInfo:  authenticationv1.UserInfo{Username: "tenant"},
			Object:    runtime.RawExtension{Raw: raw},
			OldObject: runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(&review)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// post sends one review and returns the HTTP status, 0 when the request
// failed.
func post(url string, body []byte) int {
	c := &http.Client{Timeout: 30 * time.Second, Transport: insecure.Transport}
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// memory reads one of /proc/<pid>/status's memory lines (VmRSS, VmHWM), in
// bytes.
func memory(t *testing.T, pid int, key string) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

func init() {
	// The tests run the binaries; nothing in-process logs through
	// controller-runtime, which would otherwise warn that no logger is set.
	ctrllog.SetLogger(logr.Discard())
}
