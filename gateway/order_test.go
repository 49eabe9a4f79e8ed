package gateway_test

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pibot/pibot/gateway/spend"
	"github.com/pibot/pibot/llm"
)

// gatedSpend holds the first spend check of a run until release is
// closed: the run is starting (its agent not set up yet) meanwhile.
type gatedSpend struct {
	entered, release chan struct{}
	once             sync.Once
}

func (g *gatedSpend) Check(ctx context.Context, _ spend.Who) error {
	first := false
	g.once.Do(func() { first = true; close(g.entered) })
	if first {
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
	return nil
}
func (g *gatedSpend) Record(context.Context, spend.Who, spend.Amount) error { return nil }
func (g *gatedSpend) Reserve(context.Context, spend.Who, spend.Amount) (spend.Hold, error) {
	return spend.Hold{}, nil
}
func (g *gatedSpend) Settle(context.Context, spend.Hold, spend.Amount) error { return nil }
func (g *gatedSpend) Override(context.Context, spend.Who, spend.Scope, spend.Override) error {
	return nil
}
func (g *gatedSpend) Report(context.Context, spend.Who) (string, error) { return "", nil }

// firstHeld holds the first model request until release is closed and
// reports it on called.
type firstHeld struct {
	llm.Model
	called, release chan struct{}
	once            sync.Once
}

func (m *firstHeld) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	first := false
	m.once.Do(func() { first = true; close(m.called) })
	if first {
		select {
		case <-m.release:
		case <-ctx.Done():
		}
	}
	return m.Model.Stream(ctx, req)
}

// TestMessagesKeepTheirOrderWhileARunStarts replays a reordering the
// three-replica webhook test found: m2 arrived while m1's run was still
// starting and waited for the next run, but m3, arriving once the run's
// agent was up, joined that run as a follow-up and reached the model
// before m2. A message must queue behind the ones already waiting.
func TestMessagesKeepTheirOrderWhileARunStarts(t *testing.T) {
	sp := &gatedSpend{entered: make(chan struct{}), release: make(chan struct{})}
	held := &firstHeld{called: make(chan struct{}), release: make(chan struct{})}
	h := newHarness(t, nil, withSpend(sp), withModel(func(m llm.Model) llm.Model { held.Model = m; return held }))
	h.pairUser("u2")
	queued := func() int {
		n := 0
		for _, m := range h.ad.Messages(dmConv) {
			if strings.Contains(m, "📥") {
				n++
			}
		}
		return n
	}
	h.send("m1", from("u2"))
	<-sp.entered
	h.send("m2", from("u2"))
	h.waitFor("m2 queued", func() bool { return queued() == 1 })
	close(sp.release)
	<-held.called
	h.send("m3", from("u2"))
	h.waitFor("m3 queued", func() bool { return queued() == 2 })
	close(held.release)
	h.waitFor("every message answered", func() bool { return len(pendingOf(h)) == 0 })
	var users []string
	for _, m := range h.model.Requests()[len(h.model.Requests())-1].Messages {
		if m.Role == llm.RoleUser {
			users = append(users, m.Text())
		}
	}
	if i2, i3 := slices.Index(users, "m2"), slices.Index(users, "m3"); i2 < 0 || i3 < 0 || i2 > i3 {
		t.Fatalf("the model saw the user messages in the order %q, want m1, m2, m3", users)
	}
}
