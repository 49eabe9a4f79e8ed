package gateway_test

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// Performance goals of issue #5 (see bench/gateway/README.md):
// 1,000 concurrent conversations on chattest + faux (20 ms between tokens),
// p50/p99 latency from the inbound message to the provider request under
// 1 ms / 5 ms, CPU per streamed token, memory per idle evicted session
// under 10 KB. These benchmarks report the figures; nothing here asserts
// on speed.

const (
	benchConversations = 1000
	benchTokenDelay    = 20 * time.Millisecond
	// benchReply is the scripted answer: faux streams it word by word, 13
	// tokens in 260 ms at 20 ms/token (whatever its text says).
	benchReply = "Sure, here is a short answer that streams sixteen tokens to the chat."
	// benchReplyTokens is how many tokens benchReply streams.
	benchReplyTokens = 13
)

// stampModel is a faux model for benchmarks. Every Stream call plays turn
// on a faux.Model that keeps no request log, counts the streamed text
// tokens, and tells whoever waits for the request's last user text when
// the call arrived and when the stream ended.
type stampModel struct {
	info   llm.ModelInfo
	inner  *faux.Model
	tokens atomic.Int64
	calls  atomic.Int64

	mu      sync.Mutex
	waiters map[string]*streamWait
}

// streamWait receives the arrival time of a request, then its end.
type streamWait struct {
	started chan time.Time
	ended   chan struct{}
}

func newStampModel(turn faux.Turn) *stampModel {
	info := llm.ModelInfo{ID: "m", Provider: "faux", API: faux.API, ContextWindow: 1 << 20, MaxTokens: 1000}
	return &stampModel{
		info:    info,
		inner:   faux.New(info, turn).WithoutLog(),
		waiters: map[string]*streamWait{},
	}
}

// expect registers interest in the request whose last user text is text.
func (m *stampModel) expect(text string) *streamWait {
	w := &streamWait{started: make(chan time.Time, 1), ended: make(chan struct{}, 1)}
	m.mu.Lock()
	m.waiters[text] = w
	m.mu.Unlock()
	return w
}

func (m *stampModel) Info() llm.ModelInfo { return m.info }

func (m *stampModel) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	at := time.Now()
	m.calls.Add(1)
	key := lastUserText(req.Messages)
	m.mu.Lock()
	w := m.waiters[key]
	delete(m.waiters, key)
	m.mu.Unlock()
	inner := m.inner.Stream(ctx, req)
	return func(yield func(llm.Event) bool) {
		if w != nil {
			w.started <- at
			defer func() { w.ended <- struct{}{} }()
		}
		for e := range inner {
			if e.Type == llm.EventTextDelta {
				m.tokens.Add(1)
			}
			if !yield(e) {
				return
			}
		}
	}
}

func lastUserText(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return msgs[i].Text()
		}
	}
	return ""
}

// benchGateway is a running gateway for benchmarks.
type benchGateway struct {
	reg *prometheus.Registry
	// pending counts the accepted messages the inbox still holds.
	pending func() int
	// stop shuts the gateway down, as SIGTERM does, and closes what it
	// ran on; the test's cleanup calls it too.
	stop func() error
}

// startBenchGateway runs a gateway over ad and m in a temporary data
// directory until the benchmark ends. The user "owner" owns the bot.
func startBenchGateway(tb testing.TB, ad chat.Adapter, m llm.Model, mod func(*gateway.Config)) *benchGateway {
	tb.Helper()
	dir := tb.TempDir()
	inbox, err := cluster.OpenInbox(filepath.Join(dir, "inbox.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	locker, err := cluster.NewLocker(dir)
	if err != nil {
		tb.Fatal(err)
	}
	store, err := access.OpenStore(filepath.Join(dir, "pairing.json"))
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := benchConfig(dir, reg)
	if mod != nil {
		mod(&cfg)
	}
	policy := access.Policy{Owners: []string{string(ad.Platform()) + ":owner"}, DMPolicy: "pairing"}
	g, err := gateway.New(cfg, gateway.Deps{
		Adapters: []chat.Adapter{ad},
		Models:   models{m},
		Access:   access.NewChecker(policy, store),
		Inbox:    inbox,
		Dedupe:   cluster.NewDedupe(time.Hour, 1000),
		Locker:   locker,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return runBenchGateway(tb, g, reg, inbox.Len, func() { inbox.Close() })
}

// benchConfig is the configuration of a benchmark's gateway in dir, its
// metrics in reg.
func benchConfig(dir string, reg *prometheus.Registry) gateway.Config {
	return gateway.Config{
		DataDir:   dir,
		Model:     "faux/m",
		Workspace: dir,
		FinalWait: 5 * time.Second,
		Metrics:   gateway.NewMetrics(reg),
	}
}

// runBenchGateway runs g until it is stopped (benchGateway.stop) or the
// benchmark ends, then calls closeAll. reg holds g's metrics; pending
// counts the messages its inbox holds.
func runBenchGateway(tb testing.TB, g *gateway.Gateway, reg *prometheus.Registry, pending func() int, closeAll func()) *benchGateway {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	bg := &benchGateway{reg: reg, pending: pending, stop: sync.OnceValue(func() error {
		cancel()
		err := <-done
		closeAll()
		return err
	})}
	tb.Cleanup(func() {
		if err := bg.stop(); err != nil {
			tb.Errorf("gateway.Run: %v", err)
		}
	})
	return bg
}

// metric returns the value of a gauge or counter, or the sample count of a
// histogram, named name.
func (bg *benchGateway) metric(tb testing.TB, name string) float64 {
	tb.Helper()
	mfs, err := bg.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		x := mf.GetMetric()[0]
		switch {
		case x.GetGauge() != nil:
			return x.GetGauge().GetValue()
		case x.GetCounter() != nil:
			return x.GetCounter().GetValue()
		case x.GetHistogram() != nil:
			return float64(x.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// waitMetric polls until cond holds for metric name. On time out it
// fails, saying how many accepted messages the inbox still holds.
func (bg *benchGateway) waitMetric(tb testing.TB, name string, wait time.Duration, cond func(float64) bool) {
	tb.Helper()
	deadline := time.Now().Add(wait)
	for !cond(bg.metric(tb, name)) {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s (now %v); %d accepted messages still pending in the inbox",
				name, bg.metric(tb, name), bg.pending())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// benchMessage is an inbound DM from the owner in conversation conv.
func benchMessage(platform chat.Platform, conv, n int, text string) chat.Inbound {
	c := chat.ConvRef{Platform: platform, Channel: fmt.Sprintf("dm%d", conv), DM: true}
	return chat.Inbound{
		Kind: chat.KindMessage, Conv: c, Msg: chat.MsgRef{Conv: c, ID: fmt.Sprintf("m%d", n)},
		User: chat.User{ID: "owner", Name: "Owner"}, Text: text, Time: time.Now(),
	}
}

// cpuTime is the CPU time this process has used: in user space and in
// the kernel (system calls, page faults) on its behalf.
func cpuTime(tb testing.TB) (user, system time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// goroutinesCreated is how many goroutines the process has started: each
// one handed work waits its turn to run, behind every runnable goroutine.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkConcurrentConversations keeps up to 1, 100 or 1,000 DM
// conversations busy on a chattest adapter with a faux model streaming
// tokens 20 ms apart. One op is one user message.
//
// First every conversation starts: its first message, at a random point
// of 500 ms, creates its session (the cold start, not part of the timed
// ops). Then the conversations go on concurrently: each starts again at a
// random point of the first 500 ms (or 10 s, see below), and after each
// reply has streamed its user thinks before the next message, so the
// arrivals are spread the way many concurrent users spread them.
//
// Reported: p50-ms, p99-ms and max-ms of the ongoing conversations, from
// the inbound message (before the adapter hands it to the gateway, which
// makes it durable) to the provider request; cold-p50-ms and cold-p99-ms
// of the first messages; cpu-ns/token, the process CPU time (gateway, faux
// and the fake adapter together) per token streamed in the timed part,
// and the same time per message split into user-us/msg and sys-us/msg
// (the kernel's work for the process: system calls, fsyncs among them,
// and page faults). The goal is the convs=1000 case.
//
// Each reply streams 13 tokens in 260 ms, unless the name says otherwise:
// tokens=52 streams four times the tokens in the same 260 ms, so the
// messages come at the same pace. What a message costs and what a token
// costs are told apart by the two (bench/gateway/cpusplit.sh).
//
// The think time is 100–500 ms unless the name says otherwise: a stress
// pace (1,000 conversations then send about 1,600 messages and stream
// about 21,000 tokens a second), with every conversation going on within
// the first 500 ms. think=2-10s is closer to people typing: the
// conversations go on at random points of the first 10 s, as people who
// are already chatting do.
func BenchmarkConcurrentConversations(b *testing.B) {
	for _, tc := range []struct {
		name   string
		convs  int
		pace   benchPace
		tokens int
	}{
		{"convs=1", 1, stressPace, benchReplyTokens},
		{"convs=100", 100, stressPace, benchReplyTokens},
		{"convs=1000", benchConversations, stressPace, benchReplyTokens},
		{"convs=1000,tokens=52", benchConversations, stressPace, 4 * benchReplyTokens},
		{"convs=1000,think=2-10s", benchConversations, benchPace{start: 10 * time.Second, min: 2 * time.Second, span: 8 * time.Second}, benchReplyTokens},
	} {
		b.Run(tc.name, func(b *testing.B) { benchConversationsN(b, tc.convs, tc.pace, tc.tokens, localFleet) })
	}
}

// stressPace: every conversation goes on within 500 ms, and its user
// thinks 100–500 ms after each reply.
var stressPace = benchPace{start: 500 * time.Millisecond, min: 100 * time.Millisecond, span: 400 * time.Millisecond}

// benchPace is how long a simulated user thinks between a reply and the
// next message: min plus a random part of span. In the timed part each
// conversation starts at a random point of start.
type benchPace struct{ start, min, span time.Duration }

// benchFleet is what the conversation benchmark talks to: one gateway, or
// replicas of one gateway in cluster mode (cluster_bench_test.go).
type benchFleet struct {
	gws []*benchGateway
	ads []*chattest.Adapter // ads[i] feeds gws[i]
	// route picks the replica that receives message n of conversation
	// conv (nil: the first).
	route func(conv, n int) int
	// user is the sender of a conversation's messages ("" : the owner).
	user func(conv int) string
	// roundTrips counts the fleet's Redis round trips so far (nil: no
	// Redis); reported per message of the timed part.
	roundTrips func() int
	// dedupe gives every message a platform dedupe key, as the real
	// platforms' events have.
	dedupe bool
}

// benchFastCaps lets a reply's stream edit its message every 250 ms.
var benchFastCaps = chat.Caps{Dialect: chat.DialectMarkdown, MaxLen: 4000, EditInterval: 250 * time.Millisecond}

// localFleet is one gateway on the process's own inbox, locks and
// dedupe, as `pibot serve` without cluster mode; the owner talks.
func localFleet(b *testing.B, m llm.Model) benchFleet {
	ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps), chattest.WithoutCallLog())
	return benchFleet{gws: []*benchGateway{startBenchGateway(b, ad, m, nil)}, ads: []*chattest.Adapter{ad}}
}

// metric sums metric name over the fleet's gateways.
func (f benchFleet) metric(tb testing.TB, name string) float64 {
	var sum float64
	for _, g := range f.gws {
		sum += g.metric(tb, name)
	}
	return sum
}

// pending counts the accepted messages the fleet's inboxes still hold (a
// shared inbox is counted by each replica).
func (f benchFleet) pending() int {
	n := 0
	for _, g := range f.gws {
		n += g.pending()
	}
	return n
}

// benchConversation is one simulated user of the conversation benchmark.
type benchConversation struct {
	b     *testing.B
	fleet benchFleet
	model *stampModel
	id    int
	rng   *rand.Rand
}

// say sends text as message n and returns the time from the inbound
// message to the provider request, once the reply has streamed.
func (c *benchConversation) say(n int, text string) (time.Duration, bool) {
	w := c.model.expect(text)
	ad := c.fleet.ads[0]
	if c.fleet.route != nil {
		ad = c.fleet.ads[c.fleet.route(c.id, n)]
	}
	in := benchMessage(ad.Platform(), c.id, n, text)
	if c.fleet.user != nil {
		in.User = chat.User{ID: c.fleet.user(c.id), Name: "User"}
	}
	if c.fleet.dedupe {
		in.DedupKey = fmt.Sprintf("bench:%d:%d", c.id, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t0 := time.Now()
	err := ad.Inject(ctx, in)
	cancel()
	if err != nil {
		c.b.Errorf("inject: %v", err)
		return 0, false
	}
	var at time.Time
	select {
	case at = <-w.started:
	case <-time.After(time.Minute):
		c.b.Errorf("no provider request for %q", text)
		return 0, false
	}
	<-w.ended
	return at.Sub(t0), true
}

// pause sleeps a random part of d, at least min.
func (c *benchConversation) pause(min, d time.Duration) {
	time.Sleep(min + time.Duration(c.rng.Int64N(int64(d))))
}

// benchConversationsN runs the conversation benchmark on the fleet start
// builds around the faux model, whose replies stream tokens (a multiple of
// benchReplyTokens) in the time benchReply takes. Besides the latencies it
// reports msgs/s, the messages answered per second of the timed part.
func benchConversationsN(b *testing.B, maxConvs int, think benchPace, tokens int, start func(*testing.B, llm.Model) benchFleet) {
	n := tokens / benchReplyTokens
	if n < 1 || tokens%benchReplyTokens != 0 {
		b.Fatalf("a reply streams a multiple of %d tokens, not %d", benchReplyTokens, tokens)
	}
	reply := strings.TrimSpace(strings.Repeat(benchReply+" ", n))
	if got := len(faux.Tokens(reply)); got != tokens {
		b.Fatalf("the reply streams %d tokens, not %d", got, tokens)
	}
	// Usage as a provider reports it: faux's estimate would marshal the
	// whole request on every call, which no real provider client does.
	turn := faux.Text(reply).WithDelay(benchTokenDelay / time.Duration(n)).WithUsage(llm.Usage{Input: 200, Output: int64(tokens)})
	model := newStampModel(turn)
	fleet := start(b, model)

	convs := make([]*benchConversation, min(maxConvs, b.N))
	for i := range convs {
		convs[i] = &benchConversation{b: b, fleet: fleet, model: model, id: i, rng: rand.New(rand.NewPCG(uint64(i), 5))}
	}
	var mu sync.Mutex
	var cold []time.Duration
	lat := make([]time.Duration, 0, b.N)
	// each runs f for every conversation concurrently.
	each := func(f func(c *benchConversation)) {
		var wg sync.WaitGroup
		for _, c := range convs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f(c)
			}()
		}
		wg.Wait()
	}
	each(func(c *benchConversation) {
		c.pause(0, 500*time.Millisecond)
		if d, ok := c.say(0, fmt.Sprintf("conversation %d starts", c.id)); ok {
			mu.Lock()
			cold = append(cold, d)
			mu.Unlock()
		}
	})

	// The sessions exist once their first runs are on disk.
	for deadline := time.Now().Add(time.Minute); fleet.metric(b, "pibot_run_seconds") < float64(len(convs)) || fleet.pending() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%v of %d first runs done, %d first messages still in the inbox",
				fleet.metric(b, "pibot_run_seconds"), len(convs), fleet.pending())
		}
	}

	var next atomic.Int64
	b.ResetTimer()
	user0, sys0 := cpuTime(b)
	t0, tok0, gor0 := time.Now(), model.tokens.Load(), goroutinesCreated()
	rt0 := 0
	if fleet.roundTrips != nil {
		rt0 = fleet.roundTrips()
	}
	each(func(c *benchConversation) {
		c.pause(0, think.start)
		for {
			n := int(next.Add(1))
			if n > b.N {
				return
			}
			d, ok := c.say(n, fmt.Sprintf("conversation %d message %d", c.id, n))
			if !ok {
				return
			}
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
			c.pause(think.min, think.span)
		}
	})
	user, sys := cpuTime(b)
	user, sys = user-user0, sys-sys0
	wall, streamed, gors := time.Since(t0), model.tokens.Load()-tok0, goroutinesCreated()-gor0
	b.StopTimer()
	if fleet.roundTrips != nil && len(lat) > 0 {
		// Every call of the timed part, background ones (polls, lease
		// renewals) included.
		b.ReportMetric(float64(fleet.roundTrips()-rt0)/float64(len(lat)), "redis-rt/msg")
	}

	slices.Sort(lat)
	slices.Sort(cold)
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
	b.ReportMetric(ms(percentile(lat, 1)), "max-ms")
	b.ReportMetric(ms(percentile(cold, 0.50)), "cold-p50-ms")
	b.ReportMetric(ms(percentile(cold, 0.99)), "cold-p99-ms")
	b.ReportMetric(float64(len(lat))/wall.Seconds(), "msgs/s")
	if len(lat) > 0 {
		// The benchmark's own (a timer per message) included: compare
		// builds, not absolute values.
		b.ReportMetric(float64(gors)/float64(len(lat)), "goroutines/msg")
	}
	if streamed > 0 {
		b.ReportMetric(float64((user+sys).Nanoseconds())/float64(streamed), "cpu-ns/token")
	}
	if len(lat) > 0 {
		b.ReportMetric(float64(user.Microseconds())/float64(len(lat)), "user-us/msg")
		b.ReportMetric(float64(sys.Microseconds())/float64(len(lat)), "sys-us/msg")
	}
}
