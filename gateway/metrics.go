package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
)

// Metrics are the gateway's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	messages *prometheus.CounterVec
	runs     prometheus.Counter
	runSecs  prometheus.Histogram
	queuedN  prometheus.Counter
	droppedN prometheus.Counter
	owners   prometheus.Gauge
	tokens   *prometheus.CounterVec
	cost     prometheus.Counter
	quarant  prometheus.Counter
	// Cluster mode.
	takeovers prometheus.Counter
	fenced    prometheus.Counter
	inboxLag  prometheus.Histogram
	// The per-sender budget.
	overBudgetN prometheus.Counter
}

// NewMetrics registers the gateway metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pibot_inbound_events_total", Help: "Inbound chat events by platform."}, []string{"platform"}),
		runs:     prometheus.NewCounter(prometheus.CounterOpts{Name: "pibot_runs_total", Help: "Agent runs started."}),
		runSecs:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pibot_run_seconds", Help: "Agent run duration.", Buckets: prometheus.ExponentialBuckets(0.5, 2, 12)}),
		queuedN:  prometheus.NewCounter(prometheus.CounterOpts{Name: "pibot_queued_messages_total", Help: "Messages queued while a run was active."}),
		droppedN: prometheus.NewCounter(prometheus.CounterOpts{Name: "pibot_dropped_messages_total", Help: "Queued messages dropped (with a notice)."}),
		owners:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "pibot_session_owners", Help: "Sessions loaded in memory."}),
		tokens:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pibot_tokens_total", Help: "Model tokens by kind."}, []string{"kind"}),
		cost:     prometheus.NewCounter(prometheus.CounterOpts{Name: "pibot_cost_usd_total", Help: "Model cost in US dollars."}),
		quarant:  prometheus.NewCounter(prometheus.CounterOpts{Name: "pibot_inbox_quarantined_total", Help: "Accepted messages set aside after crashing pibot twice."}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "pibot_cluster_takeovers_total",
			Help: "Sessions this replica took over with a fence above the file's (the pibot.lease marker written)."}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "pibot_cluster_fence_rejections_total",
			Help: "Session writers refused from then on because their lease was lost or another writer wrote the file."}),
		inboxLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pibot_inbox_lag_seconds",
			Help: "Time from an item's enqueue in the shared inbox to its take by the replica that runs it.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		overBudgetN: prometheus.NewCounter(prometheus.CounterOpts{Name: "pibot_sender_budget_dropped_total",
			Help: "Messages and commands not processed because their sender was over the per-sender budget (the sender is told)."}),
	}
	reg.MustRegister(m.messages, m.runs, m.runSecs, m.queuedN, m.droppedN, m.owners, m.tokens, m.cost, m.quarant,
		m.takeovers, m.fenced, m.inboxLag, m.overBudgetN)
	return m
}

func (m *Metrics) inbound(p chat.Platform) {
	if m != nil {
		m.messages.WithLabelValues(string(p)).Inc()
	}
}

func (m *Metrics) runStarted() {
	if m != nil {
		m.runs.Inc()
	}
}

func (m *Metrics) runEnded(d time.Duration) {
	if m != nil {
		m.runSecs.Observe(d.Seconds())
	}
}

func (m *Metrics) queued() {
	if m != nil {
		m.queuedN.Inc()
	}
}

func (m *Metrics) dropped() {
	if m != nil {
		m.droppedN.Inc()
	}
}

func (m *Metrics) overBudget() {
	if m != nil {
		m.overBudgetN.Inc()
	}
}

func (m *Metrics) setOwners(n int) {
	if m != nil {
		m.owners.Set(float64(n))
	}
}

func (m *Metrics) usage(u llm.Usage) {
	if m == nil {
		return
	}
	m.tokens.WithLabelValues("input").Add(float64(u.Input))
	m.tokens.WithLabelValues("output").Add(float64(u.Output))
	m.tokens.WithLabelValues("cache_read").Add(float64(u.CacheRead))
	m.tokens.WithLabelValues("cache_write").Add(float64(u.CacheWrite))
	m.cost.Add(u.Cost.Total)
}

func (m *Metrics) quarantined() {
	if m != nil {
		m.quarant.Inc()
	}
}

func (m *Metrics) takeover() {
	if m != nil {
		m.takeovers.Inc()
	}
}

func (m *Metrics) fenceRejected() {
	if m != nil {
		m.fenced.Inc()
	}
}

func (m *Metrics) inboxTaken(lag time.Duration) {
	if m != nil {
		m.inboxLag.Observe(max(lag, 0).Seconds())
	}
}
