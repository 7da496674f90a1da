package publicatie

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/handeling"
)

type metrics struct {
	published    prometheus.Counter
	republished  prometheus.Counter
	rounds       *prometheus.CounterVec
	roundTime    prometheus.Histogram
	leader       prometheus.Gauge
	yields       prometheus.Counter
	reconnects   *prometheus.CounterVec
	taken        *prometheus.CounterVec
	viewSize     prometheus.Gauge
	viewBytes    prometheus.Gauge
	viewParked   prometheus.Gauge
	viewRebuilds *prometheus.CounterVec
	held         prometheus.Gauge
	heldPersons  prometheus.Gauge
	latePersons  prometheus.Counter
	healed       prometheus.Counter
	tsregFout    prometheus.Counter
	leadMargin   prometheus.Gauge
	horizonWait  prometheus.Gauge
	horizonTx    prometheus.Gauge
	writerTx     prometheus.Gauge
	writerKeys   prometheus.Gauge
	writerAge    prometheus.Gauge
	waitBound    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "published_total",
			Help: "Handelingen put on the publication queue by committed rounds of this process (first publication)."}),
		republished: prometheus.NewCounter(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "republished_total",
			Help: "Handelingen published again after the redelivery timeout."}),
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "publication_rounds_total",
			Help: "Publication rounds by result: committed, empty, failed, fenced."}, []string{"result"}),
		roundTime: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: handeling.MetricsNamespace, Name: "publication_round_duration_seconds",
			Help: "Duration of publication rounds that published something.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "publicatie_leader",
			Help: "1 while this process holds its cluster's lease (or runs standalone), else 0."}),
		yields: prometheus.NewCounter(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "lease_yields_total",
			Help: "Times this process handed its lease over because its rounds made no progress for the lease timeout."}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "reconnects_total",
			Help: "Outages of a dependency seen by this process (database or broker)."}, []string{"dependency"}),
		taken: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "publicatie_view_taken_total",
			Help: "Handelingen taken into the leader's view of open work: intake (new ones after the stand) or nakomer (set back to be delivered, or not marked, and taken back in)."}, []string{"source"}),
		viewSize: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "publicatie_view_handelingen",
			Help: "Handelingen in the leader's view of open work (at most ViewSize); 0 on followers."}),
		viewBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "publicatie_view_bytes",
			Help: "Estimated heap of the leader's view of open work (at most ViewBytes plus one handeling); 0 on followers."}),
		viewParked: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "publicatie_view_parked_handelingen",
			Help: "Handelingen read but left out of the view because one of their persons has PersonCap handelingen in it, is held behind fout, or is parked: read again when it has drained or is released."}),
		viewRebuilds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "publicatie_view_rebuilds_total",
			Help: "Times the leader's view of open work was built again, by reason: late (registered behind its stand), sweep (it disagreed with the database), person_cap (rewound to the first parked handeling)."}, []string{"reason"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "held_behind_fout_handelingen",
			Help: "Handelingen still to be delivered that unreleased fout handelingen hold back under the strict policy (also through multi-person handelingen), as far as the leader's view has read (up to its stand); 0 on followers."}),
		heldPersons: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "held_behind_fout_persons",
			Help: "The persons of the handelingen held behind fout (brp_levering_held_behind_fout_handelingen)."}),
		tsregFout: prometheus.NewCounter(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "publicatie_tsreg_fout_total",
			Help: "Handelingen set fout at intake because their tsreg lies outside the accepted range (handeling.TsregFrom, TsregUntil)."}),
		latePersons: prometheus.NewCounter(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "publicatie_late_persons_total",
			Help: "Handelingen bijhouding added persons to after they were delivered: afnemers received them without those persons."}),
		healed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "publicatie_healed_total",
			Help: "Fout handelingen the leader retried itself: set fout because they had no persons when delivered, whose persons came since, with nothing of their persons delivered after them (the audit trail names publicatie)."}),
		leadMargin: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "publicatie_tsreg_lead_margin_seconds",
			Help: "How far the leader holds its horizon back for bijhouding's tsreg lying before its transaction's start (learned, at most MAXLEAD); 0 on followers until they lead."}),
		horizonWait: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "horizon_wait_seconds",
			Help: "How far the leader's horizon lay behind the database clock in its last round: the lead margin and the age of the oldest open transaction that holds the horizon (a registration may still commit before it). Handelingen registered after the horizon wait for it; at most brp_levering_horizon_wait_bound_seconds. 0 on followers."}),
		horizonTx: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "horizon_transaction_age_seconds",
			Help: "Age of the oldest open transaction that held the leader's horizon in its last round (0: none); the status page names it."}),
		writerTx: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "open_writer_transactions",
			Help: "Open bijhouding transactions that linked handelingen to persons, in the leader's last round (migration 0018): their persons' work waits until they end. 0 on followers."}),
		writerKeys: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "open_writer_persons",
			Help: "Persons whose work waits for an open bijhouding transaction linking handelingen to them (brp_levering_open_writer_transactions), in the leader's last round; of a bulk writer only the first 17 (it holds the whole horizon)."}),
		writerAge: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "open_writer_oldest_seconds",
			Help: "Age of the oldest open bijhouding transaction that linked handelingen to persons, in the leader's last round (0: none). Minutes: see docs/operations.md, BrpLeveringOpenWriterOld."}),
		waitBound: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "horizon_wait_bound_seconds",
			Help: "The most the horizon waits by its settings: MAXWAIT for an open transaction plus MAXLEAD for bijhouding's tsreg lead."}),
	}
	if reg != nil {
		reg.MustRegister(m.published, m.republished, m.rounds, m.roundTime, m.leader, m.yields, m.reconnects,
			m.taken, m.viewSize, m.viewBytes, m.viewParked, m.viewRebuilds, m.held, m.heldPersons, m.latePersons, m.healed, m.tsregFout, m.leadMargin,
			m.horizonWait, m.horizonTx, m.writerTx, m.writerKeys, m.writerAge, m.waitBound)
	}
	for _, d := range []string{"database", "broker"} {
		m.reconnects.WithLabelValues(d) // 0 before the first outage, so queries find it
	}
	for _, s := range []string{"intake", "nakomer"} {
		m.taken.WithLabelValues(s)
	}
	for _, r := range []string{rebuildLate, rebuildSweep, rebuildPersonCap} {
		m.viewRebuilds.WithLabelValues(r)
	}
	return m
}

// setView shows v's size in the gauges; nil (a follower's) as empty.
func (m *metrics) setView(v *view) {
	if v == nil {
		v = &view{}
	}
	m.viewSize.Set(float64(v.size()))
	m.viewBytes.Set(float64(v.bytes))
	m.viewParked.Set(float64(v.parkedN))
	m.held.Set(float64(v.heldN))
	m.heldPersons.Set(float64(v.heldPersons))
}

// BacklogCollector reports, at every scrape, the work in the database: handelingen to be
// delivered (backlog), in levering (and the cap on it), fout (and of those the ones no
// operator released yet), the age of the oldest undelivered one, and those registered in the
// future. The
// queries use the partial indexes on open work, so a scrape costs the same however long the
// history. Register it in one process per database (the publisher does).
type BacklogCollector struct {
	db            *sqlx.DB
	layout        handeling.Layout
	excluded      []string
	maxInLevering int
	backlog       *prometheus.Desc
	inLev         *prometheus.Desc
	maxInLev      *prometheus.Desc
	fout          *prometheus.Desc
	unreleased    *prometheus.Desc
	oldest        *prometheus.Desc
	future        *prometheus.Desc
	up            *prometheus.Desc
}

// NewBacklogCollector returns a collector over db, whose handelingen are in layout's tables;
// excluded are the soorten not delivered (by their names in layout), maxInLevering the
// publisher's cap on handelingen in levering (reported as it is).
func NewBacklogCollector(db *sqlx.DB, layout handeling.Layout, excluded []string, maxInLevering int) *BacklogCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(handeling.MetricsNamespace, "", name), help, nil, nil)
	}
	return &BacklogCollector{db: db, layout: layout, excluded: excluded, maxInLevering: maxInLevering,
		backlog:    d("backlog_handelingen", "Handelingen still to be delivered (statuslev NULL, soort not excluded)."),
		inLev:      d("in_levering_handelingen", "Handelingen in levering."),
		maxInLev:   d("max_in_levering_handelingen", "The publisher's cap on handelingen in levering (MAXINLEVERING)."),
		fout:       d("fout_handelingen", "Handelingen in fout."),
		unreleased: d("fout_unreleased_handelingen", "Handelingen in fout that no operator released (under the strict policy they hold back their persons)."),
		oldest:     d("oldest_undelivered_age_seconds", "Age (now - tsreg) of the oldest handeling not yet delivered, of those with a tsreg not in the future (tsreg <= now), so never negative; 0 when none."),
		future:     d("future_handelingen", "Handelingen still to be delivered (soort not excluded) whose tsreg lies more than handeling.FutureSkew (5 s) ahead of the database clock: each waits until its tsreg has passed."),
		up:         d("database_up", "1 if the last scrape could read the database."),
	}
}

// Describe implements prometheus.Collector.
func (c *BacklogCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.backlog, c.inLev, c.maxInLev, c.fout, c.unreleased, c.oldest, c.future, c.up} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *BacklogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ch <- prometheus.MustNewConstMetric(c.maxInLev, prometheus.GaugeValue, float64(c.maxInLevering))
	n, err := handeling.ReadCounts(ctx, c.db, c.layout, c.excluded, false)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(n.Backlog))
	ch <- prometheus.MustNewConstMetric(c.inLev, prometheus.GaugeValue, float64(n.InLevering))
	ch <- prometheus.MustNewConstMetric(c.fout, prometheus.GaugeValue, float64(n.Fout))
	ch <- prometheus.MustNewConstMetric(c.unreleased, prometheus.GaugeValue, float64(n.FoutUnreleased))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, n.OldestAge)
	ch <- prometheus.MustNewConstMetric(c.future, prometheus.GaugeValue, float64(n.Future))
}
