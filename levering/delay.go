package levering

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/handeling"
)

// delayBuckets are the bounds of brp_levering_delivery_delay_seconds, registration to
// delivery: from 5 ms, below what the pipeline takes at its quickest, to the hour a handeling
// may wait behind a fout or an outage. 60 s is a bound because the alert
// BrpLeveringDeliveryDelayHigh compares the 99th percentile with it: on a bound the estimate
// says exactly whether more than 1% took longer.
var delayBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// newDelayHistogram returns brp_levering_delivery_delay_seconds.
func newDelayHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: handeling.MetricsNamespace,
		Name:    "delivery_delay_seconds",
		Help:    "Time from registration to delivery (tslev - tsreg) of each handeling this process delivered, observed after its commit; a tsreg after tslev (a clock ahead) counts as 0.",
		Buckets: delayBuckets})
}

// observeDelays observes, for each delivered handeling in sent, tslev - tsreg: what afnemers
// feel of the pipeline, waits behind a fout or an outage included. tslev is the delivering
// transaction's now(), the database's clock; tsreg is bijhouding's, so a bijhouding clock off
// the database's shifts the delay by as much (ahead, it can make it negative: counted as 0).
func (m *metrics) observeDelays(found map[int64]*Verzending, sent []int64) {
	for _, id := range sent {
		if v := found[id]; v != nil {
			m.delay.Observe(max(0, v.Tslev.Sub(v.Tsreg).Seconds()))
		}
	}
}
