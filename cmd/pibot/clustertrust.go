package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/config"
)

// clusterKeys reads cluster.secret (or cluster.secret_file) and derives
// the keys that seal what the replicas keep in Redis.
func clusterKeys(cfg config.Config) (*rediscluster.Keys, error) {
	s, err := config.ReadSecret("cluster.secret", cfg.Cluster.Secret, cfg.Cluster.SecretFile)
	if err != nil {
		return nil, err
	}
	k, err := rediscluster.NewKeys([]byte(s))
	if err != nil {
		key := "cluster.secret"
		if cfg.Cluster.SecretFile != "" {
			key = "cluster.secret_file"
		}
		return nil, &config.Error{Key: key, Msg: fmt.Sprintf("holds %d bytes, want at least %d (e.g. openssl rand -base64 48)", len(s), rediscluster.MinSecretLen)}
	}
	return k, nil
}

// checkEviction refuses a Redis whose maxmemory-policy lets it delete keys
// under memory pressure (inbox items, leases: messages lost without a
// trace). A Redis that tells its policy neither through CONFIG GET nor
// INFO is used with a warning: the inbox still notices a loss of data
// (its epoch mark) and enqueues again what the replicas hold.
func checkEviction(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) error {
	policy, err := rediscluster.EvictionPolicy(ctx, rdb)
	if errors.Is(err, rediscluster.ErrPolicyUnknown) {
		log.Warn("cannot read the Redis maxmemory-policy (CONFIG and INFO refused): make sure it is noeviction, or Redis may delete waiting messages under memory pressure")
		return nil
	}
	if err != nil {
		return &config.Error{Key: "cluster.redis_url", Msg: err.Error()}
	}
	if policy != "noeviction" {
		return &config.Error{Key: "cluster.redis_url", Msg: fmt.Sprintf("the Redis maxmemory-policy is %s: under memory pressure Redis would delete keys, "+
			"waiting messages and leases among them; set maxmemory-policy noeviction (Redis then refuses writes when full, and pibot answers that it is degraded)", policy)}
	}
	return nil
}

// clusterEvents is what the Redis implementations report: forged values,
// repaired keys, a loss of Redis's data and the items enqueued again. Each
// is logged and counted; the last loss is shown by /readyz.
type clusterEvents struct {
	log      *slog.Logger
	forged   *prometheus.CounterVec
	repaired prometheus.Counter
	lost     prometheus.Counter
	requeued prometheus.Counter

	mu        sync.Mutex
	lostAt    time.Time
	requeuedN int
	// recheck has the session leases renewed at once after a loss
	// (rediscluster.Locker.Recheck; nil until the locker exists).
	recheck func()
}

// setRecheck sets what a loss of Redis's data calls to have the leases
// held checked at once.
func (e *clusterEvents) setRecheck(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recheck = f
}

func newClusterEvents(log *slog.Logger) *clusterEvents {
	return &clusterEvents{log: log,
		forged: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pibot_redis_forged_total",
			Help: "Values read from Redis that were not sealed with the cluster secret (dropped, never used), by kind."}, []string{"kind"}),
		repaired: prometheus.NewCounter(prometheus.CounterOpts{Name: "pibot_redis_repaired_total",
			Help: "Inbox keys of the wrong shape (a stream without its consumer group, a key of another type) repaired."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "pibot_redis_data_lost_total",
			Help: "Times this replica found that Redis lost its data (FLUSHALL, eviction, a restart without persistence)."}),
		requeued: prometheus.NewCounter(prometheus.CounterOpts{Name: "pibot_inbox_requeued_total",
			Help: "Inbox items this replica enqueued again after Redis lost them."}),
	}
}

// register adds the counters to reg (nil: no metrics).
func (e *clusterEvents) register(reg prometheus.Registerer) {
	if reg != nil {
		reg.MustRegister(e.forged, e.repaired, e.lost, e.requeued)
	}
}

// options sets opts' callbacks to e.
func (e *clusterEvents) options(opts *rediscluster.Options) {
	opts.OnForged = func(kind, at string) {
		e.forged.WithLabelValues(kind).Inc()
		e.log.Error("dropped a value in Redis that was not sealed with cluster.secret: someone with write access to Redis, or a replica with another secret, wrote it",
			"kind", kind, "at", at)
	}
	opts.OnRepaired = func(at, what string) {
		e.repaired.Inc()
		e.log.Warn("repaired an inbox key of the wrong shape", "at", at, "repair", what)
	}
	opts.OnDataLost = func() {
		e.lost.Inc()
		e.mu.Lock()
		e.lostAt = time.Now()
		recheck := e.recheck
		e.mu.Unlock()
		e.log.Error("Redis lost its data (the inbox's epoch mark is gone: FLUSHALL, an eviction, or a restart without persistence); enqueuing again the items this replica holds")
		if recheck != nil {
			// The leases went with the data: their runs stop now, not
			// at their next renewal, before another replica that saw
			// the loss takes their sessions over and answers again.
			recheck()
		}
	}
	opts.OnRequeued = func(key string, n int) {
		e.requeued.Add(float64(n))
		e.mu.Lock()
		e.requeuedN += n
		e.mu.Unlock()
		e.log.Warn("enqueued again items Redis lost", "key", key, "items", n)
	}
}

// readyNote returns what /readyz adds about the last loss of Redis's data
// ("" if none since start).
func (e *clusterEvents) readyNote() string {
	if e == nil {
		return ""
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lostAt.IsZero() {
		return ""
	}
	return fmt.Sprintf("redis lost its data at %s; %d items enqueued again since start", e.lostAt.UTC().Format(time.RFC3339), e.requeuedN)
}
