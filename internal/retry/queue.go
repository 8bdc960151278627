package retry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// QueueDepthMetric is the one queue metric the controllers export: the keys
// waiting in each controller's queue, by controller name.
const QueueDepthMetric = "controller_queue_depth"

// NewQueue is a controller's work queue: client-go's rate limiting and
// delaying queue over a fifo that gives back the room of a burst once it
// has drained, with no per-key bookkeeping beyond the queue itself. The
// metrics client-go keeps per queued key (when it was added, when its
// pass started) are two maps that hold every key of a burst — a start
// queues each claim and address of a /16 at once — and keep that room for
// good: some 20 MB at a /16, against a 256Mi limit; its dirty set does the
// same, another 13 MB. Only the depth is exported (QueueDepthMetric), read
// from the queue when scraped; controller-runtime's own reconcile metrics
// still time every pass.
func NewQueue(controller string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	// No name: client-go keeps no metrics, and none of their maps.
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{Queue: newFIFO[reconcile.Request]()})
	q := workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{DelayingQueue: delaying})
	depths.set(controller, q.Len)
	return q
}

// depths is the collector of QueueDepthMetric: the queue of each
// controller name started last in this process.
var depths = &queueDepths{desc: prometheus.NewDesc(QueueDepthMetric,
	"Keys waiting in the controller's work queue.", []string{"controller"}, nil)}

type queueDepths struct {
	desc *prometheus.Desc
	once sync.Once
	mu   sync.Mutex
	lens map[string]func() int
}

func (d *queueDepths) set(controller string, length func() int) {
	d.once.Do(func() { ctrlmetrics.Registry.MustRegister(d) })
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lens == nil {
		d.lens = map[string]func() int{}
	}
	d.lens[controller] = length
}

func (d *queueDepths) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *queueDepths) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, length := range d.lens {
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, float64(length()), name)
	}
}
