package integration

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	metallbiad "github.com/cozystack/address-controller/internal/driver/metallb"
)

// idleWindow is how long TestDriver_RetriesBackOff counts requests.
const idleWindow = time.Minute

// requestCounter counts the requests a client sends, by verb and path.
type requestCounter struct {
	mu    sync.Mutex
	count map[string]int
	on    bool
}

func (c *requestCounter) wrap(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			c.mu.Lock()
			if c.on && req.URL.Query().Get("watch") != "true" {
				c.count[req.Method+" "+req.URL.Path]++
			}
			c.mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
}

func (c *requestCounter) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count, c.on = map[string]int{}, true
}

// stop ends the count and returns the total and a line per verb and path.
func (c *requestCounter) stop() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = false
	total, lines := 0, []string{}
	for k, n := range c.count {
		total += n
		lines = append(lines, fmt.Sprintf("%5d %s", n, k))
	}
	slices.Sort(lines)
	return total, lines
}

// Issue 11 defect 12: a lasting conflict — a Service that is not the
// driver's sits in the driver's namespace under an address's placeholder
// name, so every create of the placeholder fails with AlreadyExists — is
// retried with the workqueue's backoff, not in a fixed 50 ms loop: the
// driver's requests over an idle minute stay bounded (printed), a Warning
// event says what is in the way, and once it is gone the address is held.
func TestDriver_RetriesBackOff(t *testing.T) {
	counter := &requestCounter{}
	e := newDriverEnvWith(t, counter.wrap)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/32"), v1alpha1.ReclaimRetain)
	ip := e.v4(0)
	squatter := e.newService(nameOf(ip), svcAnnotation(v1alpha1.AnnotationAutoClaim, "false"), func(s *corev1.Service) {
		s.Namespace, s.Spec.Type = driverNamespace, corev1.ServiceTypeClusterIP
	})
	e.create(squatter)
	t.Cleanup(func() { _ = client.IgnoreNotFound(k8s.Delete(e.ctx, squatter)) })

	e.createClaim("web", class)
	e.g.Expect(e.boundAddresses("web", 1)).To(Equal([]string{ip}))
	e.eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(k8s.List(e.ctx, &list, client.MatchingFields{"regarding.name": nameOf(ip)})).To(Succeed())
		g.Expect(slices.ContainsFunc(list.Items, func(ev eventsv1.Event) bool {
			return ev.Reason == metallbiad.ReasonPlaceholderTaken && strings.Contains(ev.Note, driverNamespace+"/"+nameOf(ip))
		})).To(BeTrue(), "a Warning names the Service in the way")
	})

	counter.start()
	time.Sleep(idleWindow)
	total, lines := counter.stop()
	t.Logf("the driver's API requests over an idle %s with the placeholder's name taken: %d\n%s", idleWindow, total, strings.Join(lines, "\n"))
	// A fixed 50 ms retry sends 1,200 creates a minute; the backoff (5 ms
	// doubling to 30 s) about fifteen.
	e.g.Expect(total).To(BeNumerically("<=", 60), "requests over an idle minute")

	e.delete(squatter)
	e.placeholderHolds(ip)
}
