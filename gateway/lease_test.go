package gateway_test

import (
	"context"
	"sync"
	"testing"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// revocable is a Locker whose leases a test can take away, as a Redis
// lease is lost when another replica takes over.
type revocable struct {
	mu     sync.Mutex
	leases []*revLease
}

type revLease struct {
	done chan struct{}
	once sync.Once
}

func (l *revLease) Fence() int64                  { return 7 }
func (l *revLease) Done() <-chan struct{}         { return l.done }
func (l *revLease) Release(context.Context) error { l.once.Do(func() { close(l.done) }); return nil }

func (r *revocable) Acquire(context.Context, string, int64) (cluster.Lease, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := &revLease{done: make(chan struct{})}
	r.leases = append(r.leases, l)
	return l, nil
}

func (r *revocable) revokeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.leases {
		l.Release(context.Background())
	}
}

func TestLostLeaseStopsTheRunAndRecordsNothing(t *testing.T) {
	g := newGate()
	locker := &revocable{}
	h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "work", `{}`)), faux.Text("must not be recorded")},
		withTools(g.tool("work")), withLocker(locker))
	h.send("long job")
	<-g.started
	// The session file is created by its first group commit.
	h.waitFor("the session file", func() bool { return len(h.sessions()) == 1 })
	locker.revokeAll()
	h.waitText(dmConv, "another pibot instance took over")
	close(g.release)
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
