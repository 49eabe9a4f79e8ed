package gateway_test

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/llm"
)

// Cluster mode figures of issue #14 (see bench/cluster/README.md): the
// gateway's overhead per message with its seams on the real Redis at
// 127.0.0.1:6379 against the process's own (goal: under 2 ms added at
// p99), and three replicas against one on the 1,000-conversation
// benchmark. Nothing here asserts on speed.

// benchRedisURL is the shared redis-server of the machine; the benchmarks
// use a random key prefix on it, deleted at the end.
const benchRedisURL = "redis://127.0.0.1:6379/0"

// benchSenderRate is the per-sender budget of the cluster benchmarks:
// every message goes through Reserve, none waits (a user sends at most
// about two messages a second).
const benchSenderRate = 100

// BenchmarkClusterConversations is BenchmarkConcurrentConversations at
// the stress pace with 100 and 1,000 conversations (100 keep two shared
// cores from saturating, so the difference is what the seams cost), each
// with a sender of its own who is not an owner (so the per-sender budget
// is asked for every message), on:
//
//   - local: one gateway on the process's own inbox file, locks, dedupe,
//     budget and index, as `pibot serve` without cluster mode;
//   - redis: one replica in cluster mode, its inbox stream, leases,
//     dedupe, budget and index on the real Redis (the same calls as
//     `pibot serve` with cluster.redis_url);
//   - redis,replicas=3: three replicas in this process, each with its own
//     Redis client, inbox consumer, lease holder and chat adapter,
//     sharing one Redis key prefix and one data directory. route=conv
//     sends every message of a conversation to one replica (a balancer
//     with affinity); route=spread sends message n to replica n mod 3
//     (round robin), so most messages reach a replica that does not hold
//     the session and wait for the holder's inbox poll (200 ms).
//
// Reported as in BenchmarkConcurrentConversations (p50-ms, p99-ms from
// the inbound message to the provider request; msgs/s answered). The
// replicas share this process's cores, so three cannot be faster than
// one on the same machine: the figure shows what coordination costs.
func BenchmarkClusterConversations(b *testing.B) {
	byConv := func(conv, _ int) int { return conv % 3 }
	spread := func(_, n int) int { return n % 3 }
	for _, tc := range []struct {
		name  string
		start func(*testing.B, llm.Model) benchFleet
	}{
		{"local", localSendersFleet},
		{"redis", redisFleet(1, nil)},
		{"redis,replicas=3,route=conv", redisFleet(3, byConv)},
		{"redis,replicas=3,route=spread", redisFleet(3, spread)},
	} {
		for _, convs := range []int{100, benchConversations} {
			b.Run(fmt.Sprintf("%s/convs=%d", tc.name, convs), func(b *testing.B) {
				benchConversationsN(b, convs, stressPace, benchReplyTokens, tc.start)
			})
		}
	}
}

// benchSender is the sender of conversation conv in the cluster benchmarks.
func benchSender(conv int) string { return fmt.Sprintf("u%d", conv) }

// localSendersFleet is one gateway on the process's own seams, as
// `pibot serve` runs without cluster mode.
func localSendersFleet(b *testing.B, m llm.Model) benchFleet {
	dir := b.TempDir()
	inbox, err := cluster.OpenInbox(filepath.Join(dir, "inbox.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	locker, err := cluster.NewLocker(dir)
	if err != nil {
		b.Fatal(err)
	}
	ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps), chattest.WithoutCallLog())
	deps := gateway.Deps{
		Inbox:  inbox,
		Dedupe: cluster.NewDedupe(time.Hour, 100_000),
		Locker: locker,
		Budget: cluster.NewBudget(benchSenderRate, benchSenderRate),
	}
	bg := startSharedGateway(b, ad, m, dir, deps, nil, inbox.Len, func() { inbox.Close() })
	return benchFleet{gws: []*benchGateway{bg}, ads: []*chattest.Adapter{ad}, user: benchSender, dedupe: true}
}

// redisFleet returns a start function of n replicas in cluster mode on the
// real Redis, routed by route (nil: all to the first).
func redisFleet(n int, route func(conv, n int) int) func(*testing.B, llm.Model) benchFleet {
	return func(b *testing.B, m llm.Model) benchFleet {
		// Registered first, so it runs last: the keys go once every
		// replica has stopped.
		probe, prefix, _ := redistest.OpenReal("127.0.0.1:6379")(b, "bench")
		if err := probe.Ping(b.Context()).Err(); err != nil {
			b.Skipf("no redis-server at 127.0.0.1:6379: %v", err)
		}
		dir := b.TempDir()
		f := benchFleet{route: route, user: benchSender, dedupe: true}
		rts := &redistest.RoundTrips{}
		for i := range n {
			ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps), chattest.WithoutCallLog())
			f.gws = append(f.gws, startRedisReplica(b, ad, m, dir, redisReplica{prefix: prefix, id: fmt.Sprintf("bench-replica-%d", i), hook: rts}))
			f.ads = append(f.ads, ad)
		}
		f.roundTrips = rts.Count
		return f
	}
}

// redisReplica names a replica of startRedisReplica: its key prefix and
// identity, the hook its client gets (nil: none), its lease TTL, inbox
// poll and drain timeout at shutdown (0: the defaults).
type redisReplica struct {
	prefix, id string
	hook       redistest.Hook
	leaseTTL   time.Duration
	poll       time.Duration
	drain      time.Duration
	// mode is the queue mode (default steer).
	mode string
	// url is the Redis (default benchRedisURL); events, if set, gets what
	// the Redis implementations report.
	url    string
	events *redisEvents
	// mod, if set, changes the replica's configuration further; models,
	// if set, resolves its model references (else every one is m).
	mod    func(*gateway.Config)
	models gateway.Models
	// pending is how long a dedupe key not committed lives (0:
	// rediscluster.DedupePending).
	pending time.Duration
}

// testClusterSecret is the cluster.secret of the tests' replicas: every
// replica seals what it writes to Redis, as `pibot serve` does.
const testClusterSecret = "gateway test cluster secret, 32 bytes"

// testKeys returns the sealing keys of testClusterSecret.
func testKeys(tb testing.TB) *rediscluster.Keys {
	k, err := rediscluster.NewKeys([]byte(testClusterSecret))
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// redisEvents collects what a replica's Redis implementations report.
type redisEvents struct {
	mu       sync.Mutex
	forged   []string
	lost     int
	requeued int
}

func (e *redisEvents) set(o *rediscluster.Options) {
	if e == nil {
		return
	}
	o.OnForged = func(kind, at string) { e.mu.Lock(); e.forged = append(e.forged, kind+" "+at); e.mu.Unlock() }
	o.OnDataLost = func() { e.mu.Lock(); e.lost++; e.mu.Unlock() }
	o.OnRequeued = func(_ string, n int) { e.mu.Lock(); e.requeued += n; e.mu.Unlock() }
}

func (e *redisEvents) snapshot() (forged []string, lost, requeued int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.forged), e.lost, e.requeued
}

// startRedisReplica runs a gateway in cluster mode whose seams are those
// `pibot serve` builds from cluster.redis_url (cmd/pibot/clustermode.go),
// with a client of its own.
func startRedisReplica(b testing.TB, ad chat.Adapter, m llm.Model, dir string, r redisReplica) *benchGateway {
	ctx := b.Context()
	url := r.url
	if url == "" {
		url = benchRedisURL
	}
	rdb, err := rediscluster.Dial(ctx, url)
	if err != nil {
		b.Skipf("no redis-server: %v", err)
	}
	if r.hook != nil {
		rdb.AddHook(r.hook)
	}
	id := r.id
	opts := rediscluster.Options{Prefix: r.prefix, Holder: id, LeaseTTL: r.leaseTTL, Keys: testKeys(b)}
	r.events.set(&opts)
	inbox, err := rediscluster.OpenInbox(ctx, rdb, opts, id)
	if err != nil {
		b.Fatal(err)
	}
	budget := rediscluster.NewBudget(rdb, opts, benchSenderRate, benchSenderRate)
	deps := gateway.Deps{
		Inbox:  inbox,
		Dedupe: rediscluster.NewAdmission(rediscluster.NewDedupePending(rdb, opts, time.Hour, cmp.Or(r.pending, rediscluster.DedupePending)), budget, inbox, nil),
		Locker: rediscluster.NewLocker(rdb, opts, nil),
		Budget: budget,
		Index: rediscluster.NewIndex(rdb, opts, rediscluster.IndexOptions{
			Seed: func() (map[string]string, error) { return gateway.RebuildIndex(dir, nil) },
		}),
	}
	pending := func() int {
		keys, err := inbox.Keys(context.Background())
		if err != nil {
			b.Errorf("inbox keys: %v", err)
		}
		return len(keys)
	}
	cfg := func(c *gateway.Config) {
		c.Cluster = gateway.ClusterConfig{Enabled: true, Poll: r.poll}
		c.DrainTimeout = r.drain
		c.QueueMode = r.mode
		if r.mod != nil {
			r.mod(c)
		}
	}
	deps.Models = r.models
	return startSharedGateway(b, ad, m, dir, deps, cfg, pending, func() {
		_ = inbox.Close()
		_ = rdb.Close()
	})
}

// startSharedGateway runs a gateway over ad, m and deps in dir, open to
// every DM sender, until the benchmark ends; mod (if not nil) changes its
// configuration.
func startSharedGateway(b testing.TB, ad chat.Adapter, m llm.Model, dir string, deps gateway.Deps,
	mod func(*gateway.Config), pending func() int, closeAll func()) *benchGateway {
	store, err := access.OpenStore(filepath.Join(dir, "pairing.json"))
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := benchConfig(dir, reg)
	if mod != nil {
		mod(&cfg)
	}
	deps.Adapters = []chat.Adapter{ad}
	if deps.Models == nil {
		deps.Models = models{m}
	}
	deps.Access = access.NewChecker(access.Policy{DMPolicy: "open"}, store)
	g, err := gateway.New(cfg, deps)
	if err != nil {
		b.Fatal(err)
	}
	return runBenchGateway(b, g, reg, pending, closeAll)
}
