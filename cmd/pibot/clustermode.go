package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/adapters/web"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redispairing"
	"github.com/pibot/pibot/cluster/rediscluster/redisspend"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/gateway/spend"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// The Redis implementations of the pairings, the spend caps and the web
// chat's bus (the gateway's collaborators and the adapters' outbound
// rates carry their guards in cluster/rediscluster).
var (
	_ access.Pairings = (*redispairing.Pairings)(nil)
	_ spend.Store     = (*redisspend.Store)(nil)
	_ web.Bus         = (*rediscluster.Topic)(nil)
)

// replicaState is the Redis side of cluster mode: one client, the key
// options and this replica's identity.
type replicaState struct {
	rdb    *redis.Client
	opts   rediscluster.Options
	id     string
	events *clusterEvents
}

// openReplica connects to cluster.redis_url; nil, nil when cluster mode
// is off.
func openReplica(ctx context.Context, cfg config.Config, log *slog.Logger) (*replicaState, error) {
	if cfg.Cluster.RedisURL == "" {
		return nil, nil
	}
	if err := clusterWebhookSecret(cfg); err != nil {
		return nil, err
	}
	keys, err := clusterKeys(cfg)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Cluster.Warnings() {
		log.Warn(w)
	}
	rdb, err := rediscluster.Dial(ctx, cfg.Cluster.RedisURL)
	if err != nil {
		return nil, &config.Error{Key: "cluster.redis_url", Msg: err.Error()}
	}
	if err := checkEviction(ctx, rdb, log); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	id := cluster.ReplicaID(host, cfg.HTTP.Listen)
	r := &replicaState{rdb: rdb, id: id, events: newClusterEvents(log), opts: rediscluster.Options{
		Prefix: cfg.Cluster.KeyPrefix, LeaseTTL: cfg.Cluster.LeaseTTL.D(), Holder: id, Keys: keys,
	}}
	r.events.options(&r.opts)
	return r, nil
}

// rates returns the outbound rates the adapters share: through Redis in
// cluster mode (falling back to the process's while Redis does not
// answer), else in the process.
func (r *replicaState) rates() tokenbucket.Rates {
	if r == nil {
		return cluster.NewRates()
	}
	return &fallbackRates{shared: rediscluster.NewRates(r.rdb, r.opts), local: cluster.NewRates()}
}

// webTopic is the pub/sub channel, under the key prefix, on which the
// replicas' web chats share their events.
const webTopic = "web:events"

// webBus returns the web chat's bus between the replicas; nil when
// cluster mode is off (the web chat shows what its process writes).
func (r *replicaState) webBus() web.Bus {
	if r == nil {
		return nil
	}
	return rediscluster.NewTopic(r.rdb, r.opts, webTopic)
}

// fallbackRates paces through the replicas' shared buckets and, while
// Redis does not answer, through this process's: the bot keeps talking
// (the "degraded" notice, the end of a run) at a pace that is right for
// one replica, instead of failing every call.
type fallbackRates struct {
	shared *rediscluster.Rates
	local  *cluster.Rates
}

var (
	_ tokenbucket.SharedPause = (*fallbackRates)(nil)
	_ tokenbucket.Rates       = (*fallbackRates)(nil)
)

// TakeAll takes a call's tokens from the shared buckets, or from the
// local ones when Redis fails (the shared pause is then unknown: the
// adapter's own pause still holds).
func (f *fallbackRates) TakeAll(ctx context.Context, pause string, buckets []tokenbucket.Bucket) (time.Duration, int, error) {
	d, which, err := f.shared.TakeAll(ctx, pause, buckets)
	if err != nil && ctx.Err() == nil {
		return f.local.TakeAll(ctx, pause, buckets)
	}
	return d, which, err
}

// Pause pauses key on every replica (the caller pauses its own process
// whatever the answer).
func (f *fallbackRates) Pause(ctx context.Context, key string, d time.Duration) error {
	return f.shared.Pause(ctx, key, d)
}

// ping checks that Redis answers within a second (for /readyz); nil when
// cluster mode is off.
func (r *replicaState) ping(ctx context.Context) error {
	if r == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := r.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// readyNote is what /readyz says of a loss of Redis's data ("" if none).
func (r *replicaState) readyNote() string {
	if r == nil {
		return ""
	}
	return r.events.readyNote()
}

// close closes the Redis client.
func (r *replicaState) close() {
	if r != nil {
		_ = r.rdb.Close()
	}
}

// clusterParts are the gateway's collaborators in cluster mode.
type clusterParts struct {
	lock    *cluster.ReplicaLock
	inbox   *rediscluster.Inbox
	locker  *rediscluster.Locker
	deps    gateway.Deps // Inbox, Dedupe, Locker, Budget, Index
	pairing *redispairing.Pairings
	spend   *redisspend.Store
}

// openCluster takes this replica's lock on the shared data directory and
// builds the Redis implementations of the gateway's seams.
func (r *replicaState) openCluster(ctx context.Context, cfg config.Config, log *slog.Logger) (*clusterParts, error) {
	lock, err := cluster.LockReplica(cfg.DataDir, r.id)
	if errors.Is(err, cluster.ErrLocked) {
		return nil, fmt.Errorf("data directory %s: %w (set http.listen apart for each replica on one host)", cfg.DataDir, err)
	}
	if err != nil {
		return nil, err
	}
	ib, err := rediscluster.OpenInbox(ctx, r.rdb, r.opts, r.id)
	if err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	locker := rediscluster.NewLocker(r.rdb, r.opts, log)
	r.events.setRecheck(locker.Recheck)
	index := rediscluster.NewIndex(r.rdb, r.opts, rediscluster.IndexOptions{
		Seed: func() (map[string]string, error) { return gateway.RebuildIndex(cfg.DataDir, log) },
	})
	log.Info("cluster mode", "replica", r.id, "key_prefix", r.opts.KeyPrefix(), "lease_ttl", locker.TTL())
	// access.budget per sender, across replicas (per_minute 0: none).
	budget := rediscluster.NewBudget(r.rdb, r.opts, cfg.Access.Budget.PerMinute/60, cfg.Access.Budget.Burst)
	return &clusterParts{lock: lock, inbox: ib, locker: locker, pairing: redispairing.NewPairings(r.rdb, r.opts),
		spend: redisspend.New(r.rdb, r.opts),
		deps: gateway.Deps{
			Inbox: ib,
			// The dedupe asks the sender's budget, and enqueues, in the same
			// round trip (rediscluster.Admission.Admit).
			Dedupe: rediscluster.NewAdmission(rediscluster.NewDedupe(r.rdb, r.opts, dedupeTTL), budget, ib, log),
			Locker: locker,
			Budget: budget,
			Index:  index,
		}}, nil
}

// close records the inbox's clean stop and releases the replica lock.
func (p *clusterParts) close() {
	_ = p.inbox.Close()
	_ = p.lock.Unlock()
}

// redisLog receives go-redis's own log lines (a dial that failed, pool
// trouble) and passes them to a command's logger at debug level: pibot
// reports Redis trouble itself, in words and once (the gateway's outage
// lines, a command's one error naming the address); go-redis would write
// a line per failed dial. go-redis keeps its logger in a package
// variable, so main sets one redisLog (redis.SetLogger) before any
// command runs and a command that logs hands it its logger (use); until
// then, and in tests that run commands in-process, the lines are dropped.
type redisLog struct{ log atomic.Pointer[slog.Logger] }

// use sends the lines to log from now on. A nil redisLog does nothing.
func (l *redisLog) use(log *slog.Logger) {
	if l != nil {
		l.log.Store(log.With("component", "redis"))
	}
}

// Printf implements go-redis's internal logging interface.
func (l *redisLog) Printf(ctx context.Context, format string, v ...any) {
	if log := l.log.Load(); log != nil {
		log.DebugContext(ctx, fmt.Sprintf(format, v...))
	}
}
