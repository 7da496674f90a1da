package levering

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
)

// metrics are what a consumer's workers did, as its counters and histograms.
type metrics struct {
	delivered, duplicates, fout, heldBack, parked atomic.Int64
	processing                                    prometheus.Histogram
	delay                                         prometheus.Histogram   // delay.go
	reconnects                                    *prometheus.CounterVec // by dependency
	heldBackBy                                    *prometheus.CounterVec // by reason
}

func newMetrics() *metrics {
	m := &metrics{
		processing: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: handeling.MetricsNamespace,
			Name: "processing_duration_seconds", Help: "Time to handle one batch of publications, from receipt to commit.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		delay: newDelayHistogram(),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "reconnects_total",
			Help: "Outages of a dependency seen by this process (database or broker)."}, []string{"dependency"}),
		heldBackBy: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "held_back_total",
			Help: "Handelingen of a publication not delivered now, by reason (docs/robustness.md, Order at the consumer): " +
				"an older handeling of a person still to be delivered (older_open) or fout in the same batch (behind_fout), " +
				"persons that differ from those the publication carried (persons_changed), set back to be delivered; " +
				"or not in levering at all (not_in_levering), left as it was. The publisher publishes each again."}, []string{"reason"}),
	}
	for _, d := range []string{"database", "broker"} {
		m.reconnects.WithLabelValues(d) // 0 before the first outage, so queries find it
	}
	for _, r := range heldBackReasons {
		m.heldBackBy.WithLabelValues(r)
	}
	return m
}

// register registers the consumer's metrics with reg, if any.
func (c *Consumer) register(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	m := c.m
	reg.MustRegister(
		counter("delivered_total", "Handelingen set geleverd and sent to the verzending queue by this process.", &m.delivered),
		counter("duplicates_total", "Publications absorbed because their handeling was already delivered.", &m.duplicates),
		counter("fout_total", "Handelingen set fout (known errors) by this process.", &m.fout),
		counter("set_aside_total", "Unreadable publications sent to the dead-letter queue.", &m.parked),
		counter("stuck_batches_total", "Batches handed back because a worker held them longer than the batch timeout.", &c.stuck),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "batch_age_seconds",
			Help: "How long the oldest batch this process holds has been in hand; 0 while it holds none."},
			func() float64 { return c.oldestBatch().Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "broker_connected",
			Help: "1 while the consumer is subscribed to the publication queue."}, func() float64 {
			if c.connected.Load() {
				return 1
			}
			return 0
		}),
		m.processing, m.delay, m.reconnects, m.heldBackBy, broker.NodeCollector(handeling.MetricsNamespace, c.subs, c.sends))
}
