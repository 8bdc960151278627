package pool

import (
	"math/big"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/allocator"
	"github.com/cozystack/address-controller/internal/driver/metallb"
)

var (
	classAddresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metallb_iad_class_addresses",
		Help: "Addresses of a class's MetalLB pool by family and state (total, allocated, available).",
	}, []string{"class", "pool", "family", "state"})
	classReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metallb_iad_class_ready",
		Help: "1 when the driver accepts the class and its pool, 0 when it refuses them.",
	}, []string{"class"})
)

// RegisterMetrics registers the class gauges with controller-runtime's registry.
func RegisterMetrics() error {
	for _, c := range []prometheus.Collector{classAddresses, classReady} {
		if err := metrics.Registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func setMetrics(c metallb.Class, counts map[v1alpha1.IPFamily]allocator.Capacity) {
	classAddresses.DeletePartialMatch(prometheus.Labels{"class": c.Name})
	ready := 0.0
	if c.Accepted() {
		ready = 1
	}
	classReady.WithLabelValues(c.Name).Set(ready)
	for family, n := range counts {
		for state, v := range map[string]*big.Int{"total": n.Total, "allocated": n.Allocated, "available": n.Available} {
			f, _ := new(big.Float).SetInt(v).Float64()
			classAddresses.WithLabelValues(c.Name, c.PoolName, string(family), state).Set(f)
		}
	}
}

func deleteMetrics(class string) {
	classAddresses.DeletePartialMatch(prometheus.Labels{"class": class})
	classReady.DeleteLabelValues(class)
}
