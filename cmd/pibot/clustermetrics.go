package main

import (
	"context"
	"errors"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster/rediscluster"
)

// registerClusterMetrics adds the Redis side of cluster mode to reg: the
// leases this replica holds (sessions and leader roles) and the Redis
// calls that failed, by command. reg may be nil (no metrics).
func registerClusterMetrics(reg prometheus.Registerer, rdb *redis.Client, locker *rediscluster.Locker) {
	if reg == nil {
		return
	}
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pibot_cluster_leases_held",
		Help: "Leases this replica holds now (sessions, leader roles, takeovers in progress)."},
		func() float64 { return float64(locker.Stats().Held) })
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pibot_redis_errors_total",
		Help: "Redis calls that failed (unreachable, timed out, refused), by command."}, []string{"op"})
	reg.MustRegister(held, errs)
	rdb.AddHook(errorHook{errs: errs})
}

// errorHook counts the failed Redis commands of a client. A missing key
// (redis.Nil), a script not cached yet and a call its caller cancelled
// are not failures.
type errorHook struct{ errs *prometheus.CounterVec }

func (h errorHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil && ctx.Err() == nil {
			h.errs.WithLabelValues("dial").Inc()
		}
		return c, err
	}
}

func (h errorHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(ctx, err, cmd.Name())
		return err
	}
}

func (h errorHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.count(ctx, err, "pipeline")
		return err
	}
}

func (h errorHook) count(ctx context.Context, err error, op string) {
	// NOSCRIPT: a script's EVALSHA before go-redis sends its EVAL.
	if err == nil || errors.Is(err, redis.Nil) || redis.HasErrorPrefix(err, "NOSCRIPT") || ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return
	}
	h.errs.WithLabelValues(op).Inc()
}
