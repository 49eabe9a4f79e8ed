package gateway_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// endGate is an extension whose agent_end hook holds the end of run
// number holdRun (counted from 1) until release is closed: that run's
// answer is out, but the run is not over.
type endGate struct {
	holdRun int32
	runs    atomic.Int32
	holding chan struct{}
	release chan struct{}
}

func (*endGate) Commands() []chat.CommandSpec { return nil }
func (*endGate) Input(_ context.Context, in chat.Inbound) (string, string, bool, error) {
	return in.Text, "", false, nil
}
func (*endGate) BeforeStart(context.Context, string) (string, error) { return "", nil }
func (*endGate) Hooks(h agent.Hooks) agent.Hooks                     { return h }
func (*endGate) Review() (string, string)                            { return "", "" }
func (*endGate) Approve(string, string) (string, error)              { return "", nil }
func (g *endGate) End(context.Context, []llm.Message) {
	if g.runs.Add(1) == g.holdRun {
		close(g.holding)
		<-g.release
	}
}

// A reply to an earlier answer that comes while the previous run is
// ending (its answer shown, the run not over) starts the next run, which
// branches from the message replied to, as a reply at any other moment
// does. It used to be applied on top of the previous run (a reply during
// a run joins it, and this one was taken as such): the e2e test
// TestDiscordDMReplyBranch failed that way under load.
func TestReplyWhileARunEndsBranches(t *testing.T) {
	gate := &endGate{holdRun: 2, holding: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(gate.release) }) }
	h := newHarness(t, []faux.Turn{faux.Text("first answer"), faux.Text("second answer"), faux.Text("branched answer")},
		withConfig(func(c *gateway.Config) { c.Extensions = gate }))
	t.Cleanup(release) // before the harness stops
	h.send("one")
	h.waitText(dmConv, "first answer")
	h.waitFor("first delivery", func() bool { return len(deliveries(h)) == 1 })
	first := deliveries(h)[0]
	h.send("two")
	select {
	case <-gate.holding: // the second answer is out; its run has not ended
	case <-time.After(30 * time.Second):
		t.Fatal("the second run never reached its end")
	}
	h.waitText(dmConv, "second answer")
	h.send("alternative", replyTo(first))
	release()
	h.waitText(dmConv, "branched answer")
	want := []string{"one", "first answer", "alternative"}
	if got := h.lastRequestTexts(); !slices.Equal(got, want) {
		t.Fatalf("the model's request = %q, want the branch from the first answer %q", got, want)
	}
}
