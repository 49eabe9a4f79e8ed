package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pibot/pibot/chat"
)

// foreignCounter is an adapter that drops deliveries meant for another
// workspace or app than its own (slack.Adapter).
type foreignCounter interface {
	ForeignDropped() uint64
}

// registerAdapterMetrics adds the adapters' own counters to reg:
// pibot_foreign_events_total{platform}. reg may be nil (no metrics).
func registerAdapterMetrics(reg prometheus.Registerer, adapters []chat.Adapter) {
	if reg == nil {
		return
	}
	for _, a := range adapters {
		fc, ok := a.(foreignCounter)
		if !ok {
			continue
		}
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pibot_foreign_events_total",
			Help:        "Platform deliveries dropped because they came for another workspace or app than the bot's own.",
			ConstLabels: prometheus.Labels{"platform": string(a.Platform())}},
			func() float64 { return float64(fc.ForeignDropped()) }))
	}
}
