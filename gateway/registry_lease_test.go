package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// revocable is a Locker whose leases a test can take away, as a Redis
// lease is lost when another replica takes over.
// Every lease it grants has fence 7. While refuse is set, keys starting
// with "adapter:" are held by another replica.
type revocable struct {
	mu      sync.Mutex
	leases  []*revLease
	keys    []string
	refuse  bool
	refused int // Acquires refused so far
}

type revLease struct {
	done chan struct{}
	once sync.Once
}

func (l *revLease) Fence() int64                  { return 7 }
func (l *revLease) Done() <-chan struct{}         { return l.done }
func (l *revLease) Release(context.Context) error { l.once.Do(func() { close(l.done) }); return nil }

func (r *revocable) Acquire(_ context.Context, key string, _ int64) (cluster.Lease, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse && strings.HasPrefix(key, "adapter:") {
		r.refused++
		return nil, cluster.ErrLeaseHeld
	}
	l := &revLease{done: make(chan struct{})}
	r.leases = append(r.leases, l)
	r.keys = append(r.keys, key)
	return l, nil
}

// revoke takes away the leases of key, as a Redis lease expires.
func (r *revocable) revoke(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, l := range r.leases {
		if r.keys[i] == key {
			l.Release(context.Background())
		}
	}
}

func (r *revocable) setRefuse(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refuse = on
}

func (r *revocable) refusedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

func (r *revocable) held(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i, l := range r.leases {
		select {
		case <-l.done:
		default:
			if r.keys[i] == key {
				n++
			}
		}
	}
	return n
}

func (r *revocable) revokeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.leases {
		l.Release(context.Background())
	}
}

// TestLostLeaseStopsTheRunAndRecordsNothing: when the session's lease is
// lost mid-run, the run stops, records nothing more and makes no chat
// call at all (not even a note or an edit of its own message): the
// replica that took the session over tells the user.
func TestLostLeaseStopsTheRunAndRecordsNothing(t *testing.T) {
	started, aborted := make(chan struct{}), make(chan struct{})
	work := &agenttest.Tool{Name: "work", Fn: func(ctx context.Context, _ string, _ json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		close(started)
		<-ctx.Done() // only the lost lease ends it
		close(aborted)
		return llm.ToolOutput{}, fmt.Errorf("Operation aborted")
	}}
	locker := &revocable{}
	h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "work", `{}`)), faux.Text("must not be recorded")},
		withTools(work), withLocker(locker))
	h.send("long job")
	<-started
	// The session file is created by its first group commit.
	h.waitFor("the session file", func() bool { return len(h.sessions()) == 1 })
	calls := len(h.ad.Calls())
	locker.revokeAll()
	select {
	case <-aborted:
	case <-time.After(30 * time.Second):
		t.Fatal("the run's tool still runs after its lease was lost")
	}
	h.stop()
	for _, c := range h.ad.Calls()[calls:] {
		if c.Conv.Key() == dmConv.Key() {
			t.Errorf("a chat call after the lease was lost: %s %q", c.Method, c.Text)
		}
	}
	path := h.sessions()[0]
	for _, e := range h.entries(path) {
		if e.Type == session.TypeMessage && (e.Message.Role == llm.RoleToolResult || e.Message.Text() == "must not be recorded") {
			t.Fatalf("a fenced owner recorded %s", e.Message.Role)
		}
		if e.Fence != 7 {
			t.Fatalf("entry %s written without the lease's fence (%d)", e.ID, e.Fence)
		}
	}
}

// TestTakeoverStaysAboveTheFileFence replays a lease store that lost its
// fence counter (Redis after a failover): the file was written with fence
// 7, the new locker counts from 1. The new owner must get a fence above
// the file's, write the pibot.lease marker before anything else, and
// answer; a late write of the old owner is then ignored by readers.
func TestTakeoverStaysAboveTheFileFence(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("first answer"), faux.Text("second answer")}, withLocker(&revocable{}))
	h.send("hello")
	h.waitText(dmConv, "first answer")
	h.waitFor("the session file", func() bool { return len(h.sessions()) == 1 })
	path := h.sessions()[0]
	h.stop()
	h.waitFor("fence 7 in the file", func() bool {
		n, err := session.HighestFence(session.FileStorage{}, path)
		return err == nil && n == 7
	})

	h.locker = nil // a real cluster.LocalLocker on a counter that starts at 1
	h.start()
	h.send("again")
	h.waitText(dmConv, "second answer")
	h.waitFor("the answer recorded", func() bool {
		for _, e := range h.entries(path) {
			if e.Type == session.TypeMessage && e.Message.Text() == "second answer" {
				return true
			}
		}
		return false
	})
	var marker *session.LeaseMarker
	var after []session.Entry
	for _, e := range h.entries(path) {
		switch {
		case e.Type == session.TypeCustom && e.CustomType == session.CustomLease:
			if marker != nil {
				t.Fatal("two lease markers for one takeover")
			}
			marker = &session.LeaseMarker{}
			if err := json.Unmarshal(e.Data, marker); err != nil {
				t.Fatal(err)
			}
			if e.Fence != marker.Fence {
				t.Fatalf("marker entry fence %d, data fence %d", e.Fence, marker.Fence)
			}
		case marker != nil:
			after = append(after, e)
		}
	}
	if marker == nil {
		t.Fatal("no pibot.lease marker after the takeover")
	}
	if marker.Fence <= 7 || marker.Prev != 7 || marker.Holder == "" || marker.At == "" {
		t.Fatalf("marker = %+v, want a fence above 7 and prevFence 7", *marker)
	}
	if len(after) == 0 {
		t.Fatal("nothing recorded after the marker")
	}
	for _, e := range after {
		if e.Fence != marker.Fence {
			t.Fatalf("entry %s (%s) after the takeover has fence %d, want %d", e.ID, e.Type, e.Fence, marker.Fence)
		}
	}

	// The old owner, still alive somewhere, appends late with fence 7.
	h.stop()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf(`{"type":"custom","customType":"pibot.stale","id":"0badf00d","parentId":%q,"timestamp":%q,"fence":7}`+"\n",
		after[len(after)-1].ID, time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := f.WriteString(stale); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.Tree().Get("0badf00d"); ok || len(s.Report().StaleFenced) != 1 {
		t.Fatalf("the stale owner's entry was not ignored (report %+v)", s.Report())
	}
}

// polling is an adapter that must run on one replica only, like Telegram
// long polling: it counts its Runs and the Runs active at once.
type polling struct {
	*chattest.Adapter
	runs, active atomic.Int32
	overlap      atomic.Bool
}

func (p *polling) SingletonKey() string { return "test/poll" }

func (p *polling) Run(ctx context.Context, sink chat.Sink) error {
	p.runs.Add(1)
	if p.active.Add(1) > 1 {
		p.overlap.Store(true)
	}
	defer p.active.Add(-1)
	return p.Adapter.Run(ctx, sink)
}

// TestSingletonAdapterRunsOnlyUnderItsLease replays a replica losing the
// polling lease to another one: its Run is cancelled at once, is not
// started again while the other replica holds the lease, and starts again
// (messages flow) once the lease is granted back.
func TestSingletonAdapterRunsOnlyUnderItsLease(t *testing.T) {
	t.Parallel()
	locker := &revocable{}
	var p *polling
	h := newHarness(t, []faux.Turn{faux.Text("answer one"), faux.Text("answer two")}, withLocker(locker),
		withAdapter(func(ad *chattest.Adapter) chat.Adapter { p = &polling{Adapter: ad}; return p }))
	const key = "adapter:test/poll"
	h.waitFor("the polling lease", func() bool { return locker.held(key) == 1 && p.active.Load() == 1 })
	h.send("hello")
	h.waitText(dmConv, "answer one")

	locker.setRefuse(true) // another replica takes the lease over
	locker.revoke(key)
	h.waitFor("Run cancelled after the lease was lost", func() bool { return p.active.Load() == 0 })
	h.waitFor("a second attempt at the lease", func() bool { return locker.refusedCount() >= 1 })
	if n := p.runs.Load(); n != 1 {
		t.Fatalf("Run started %d times while another replica held the lease", n)
	}

	locker.setRefuse(false)
	h.waitFor("Run again under a new lease", func() bool { return p.runs.Load() == 2 && p.active.Load() == 1 })
	h.send("again")
	h.waitText(dmConv, "answer two")
	if p.overlap.Load() {
		t.Fatal("two Runs of a singleton adapter were active at once")
	}
}

// TestOtherWriterStopsTheRunSilently: in cluster mode a session file that
// grew under its writer means another replica took the session over (its
// lease expired unnoticed, say). The stale run stops, appends nothing
// and makes no chat call, as after a lost lease; the metric counts it.
func TestOtherWriterStopsTheRunSilently(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	work := &agenttest.Tool{Name: "work", Fn: func(ctx context.Context, _ string, _ json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		close(started)
		<-release
		return llm.ToolOutput{Content: []llm.Content{llm.TextBlock("done")}}, nil
	}}
	reg := prometheus.NewRegistry()
	h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "work", `{}`)), faux.Text("must not be recorded")},
		withTools(work), withLocker(&revocable{}), withConfig(func(c *gateway.Config) { c.Metrics = gateway.NewMetrics(reg) }))
	h.send("long job")
	<-started
	h.waitFor("the session file", func() bool { return len(h.sessions()) == 1 })
	path := h.sessions()[0]
	// The new holder's marker, as another replica writes it.
	marker := `{"type":"custom","customType":"pibot.lease","id":"0badf00d","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","fence":8}` + "\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(marker); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, _ := os.ReadFile(path)
	calls := len(h.ad.Calls())
	close(release)
	h.waitFor("the fence rejection to be counted", func() bool {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "pibot_cluster_fence_rejections_total" {
				return mf.GetMetric()[0].GetCounter().GetValue() == 1
			}
		}
		return false
	})
	h.stop()
	for _, c := range h.ad.Calls()[calls:] {
		if c.Conv.Key() == dmConv.Key() {
			t.Errorf("a chat call after another replica wrote the file: %s %q", c.Method, c.Text)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the stale writer appended after another replica's entry:\n%s", after[len(before):])
	}
}

// deadlineLocker grants leases that know their deadline, as Redis leases
// do (rediscluster.Lease.Deadline).
// Its leases' deadline is one for all, which a test may move (to the
// past: leases whose timers have not fired yet).
type deadlineLocker struct {
	revocable
	deadline atomic.Int64 // unix ns
}

func newDeadlineLocker(deadline time.Time) *deadlineLocker {
	d := &deadlineLocker{}
	d.deadline.Store(deadline.UnixNano())
	return d
}

type deadlineLease struct {
	cluster.Lease
	l *deadlineLocker
}

func (l deadlineLease) Deadline() time.Time { return time.Unix(0, l.l.deadline.Load()) }

func (d *deadlineLocker) Acquire(ctx context.Context, key string, fence int64) (cluster.Lease, error) {
	l, err := d.revocable.Acquire(ctx, key, fence)
	if err != nil {
		return nil, err
	}
	return deadlineLease{Lease: l, l: d}, nil
}

// bounded is a singleton adapter that can bound its work by its lease
// (as Telegram's poller does): it records how long its lease was said to
// be held.
type bounded struct {
	polling
	held atomic.Int64 // ns; 0: RunBounded was not called
}

func (b *bounded) RunBounded(ctx context.Context, sink chat.Sink, held func() time.Duration) error {
	b.held.Store(int64(held()))
	return b.polling.Run(ctx, sink)
}

// TestSingletonAdapterIsBoundedByItsLease: an adapter that can bound its
// work by its lease (Telegram's long polls) is run with how long the
// lease is held (its deadline from now), when the lease knows it; with a
// lease that does not (the local one, never lost), it is simply run.
func TestSingletonAdapterIsBoundedByItsLease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		locker  gateway.Locker
		bounded bool
	}{
		{"a lease with a deadline", newDeadlineLocker(time.Now().Add(time.Hour)), true},
		{"a lease without one", &revocable{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b *bounded
			h := newHarness(t, []faux.Turn{faux.Text("answer")}, withLocker(tc.locker),
				withAdapter(func(ad *chattest.Adapter) chat.Adapter { b = &bounded{polling: polling{Adapter: ad}}; return b }))
			h.waitFor("the adapter running under its lease", func() bool { return b.active.Load() == 1 })
			held := time.Duration(b.held.Load())
			if !tc.bounded {
				if held != 0 {
					t.Fatalf("RunBounded called (held %v) with a lease that has no deadline", held)
				}
				return
			}
			if held < 59*time.Minute || held > time.Hour {
				t.Fatalf("RunBounded told the lease is held %v; want its deadline from now (~1h)", held)
			}
			h.send("hello")
			h.waitText(dmConv, "answer")
		})
	}
}

// TestNoChatCallPastTheLeaseDeadline: a replica that wakes up (SIGCONT)
// past its session lease's deadline, before the lease's own timer has
// ended it, makes no further chat call for that session: not the edit of
// a reply a timer tick had due, not the final answer. The new owner
// answers.
func TestNoChatCallPastTheLeaseDeadline(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	work := &agenttest.Tool{Name: "work", Fn: func(ctx context.Context, _ string, _ json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		close(started)
		<-release
		return llm.ToolOutput{Content: []llm.Content{llm.TextBlock("done")}}, nil
	}}
	locker := newDeadlineLocker(time.Now().Add(time.Hour))
	h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "work", `{}`)), faux.Text("must not reach the chat")},
		withTools(work), withLocker(locker))
	h.send("long job")
	<-started
	h.waitFor("the reply on screen", func() bool { return len(h.ad.Calls()) > 0 })
	locker.deadline.Store(time.Now().Add(-time.Second).UnixNano())
	before := len(h.ad.Calls())
	close(release)
	h.waitFor("the run's answer in its session", func() bool {
		for _, path := range h.sessions() {
			for _, e := range h.entries(path) {
				if e.Message != nil && strings.Contains(e.Message.Text(), "must not reach the chat") {
					return true
				}
			}
		}
		return false
	})
	if calls := h.ad.Calls(); len(calls) != before {
		t.Fatalf("%d chat calls past the lease's deadline: %v", len(calls)-before, calls[before:])
	}
}
