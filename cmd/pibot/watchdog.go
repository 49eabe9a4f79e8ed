package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/config"
)

// watchdog turns agent.max_run and agent.max_idle into the agent's run
// limits. A stopped run is logged and, with reg, counted in
// pibot_runs_stopped_total{limit="max_run"|"max_idle"}.
func watchdog(cfg config.Config, log *slog.Logger, reg prometheus.Registerer) agent.Watchdog {
	wd := agent.Watchdog{MaxRun: cfg.Agent.MaxRun.D(), MaxIdle: cfg.Agent.MaxIdle.D()}
	var stopped *prometheus.CounterVec
	if reg != nil {
		stopped = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pibot_runs_stopped_total",
			Help: "Agent runs stopped by a watchdog (agent.max_run, agent.max_idle), by limit.",
		}, []string{"limit"})
		reg.MustRegister(stopped)
		stopped.WithLabelValues("max_run")
		stopped.WithLabelValues("max_idle")
	}
	wd.OnStop = func(key string) {
		limit := key[len("agent."):]
		log.Warn("run stopped by its watchdog", "limit", key, "max_run", wd.MaxRun, "max_idle", wd.MaxIdle)
		if stopped != nil {
			stopped.WithLabelValues(limit).Inc()
		}
	}
	return wd
}
