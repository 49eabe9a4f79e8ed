package gateway_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// TestCompactWithNothingToSummarise: /compact on a conversation that fits
// in what compaction keeps says so and does not call the model; right
// after a compaction it says nothing was said since.
func TestCompactWithNothingToSummarise(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("hello"), faux.Text("again"), faux.Text("the summary")}, withConfig(func(c *gateway.Config) {
		c.Compaction = compaction.Settings{ReserveTokens: 1000, KeepRecentTokens: 20000}
	}))
	h.send("hi")
	h.waitText(dmConv, "hello")
	h.waitFor("the run to end", func() bool { return len(pendingOf(h)) == 0 })
	calls := h.model.Calls()
	h.send("/compact")
	h.waitText(dmConv, "Nothing to compact: the conversation is short enough")
	if n := h.model.Calls(); n != calls {
		t.Fatalf("the model was asked %d times for nothing", n-calls)
	}
}

func TestCompactTwiceSaysAlreadyCompacted(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("one"), faux.Text("two"), faux.Text("the summary")}, withConfig(func(c *gateway.Config) {
		c.Compaction = compaction.Settings{ReserveTokens: 1000, KeepRecentTokens: 1}
	}))
	h.send("first")
	h.waitText(dmConv, "one")
	h.send("second")
	h.waitText(dmConv, "two")
	h.waitFor("the run to end", func() bool { return len(pendingOf(h)) == 0 })
	h.send("/compact")
	h.waitText(dmConv, "🗜 Compacted.")
	calls := h.model.Calls()
	h.send("/compact")
	h.waitText(dmConv, "nothing was said since the last compaction")
	if n := h.model.Calls(); n != calls {
		t.Fatalf("the model was asked again")
	}
}

// TestCommandRepliesInOrder: /help sent behind a /compact that waits for
// the model is answered after it, in the order the commands were sent.
func TestCommandRepliesInOrder(t *testing.T) {
	held := &heldModel{holding: make(chan struct{}), release: make(chan struct{})}
	h := newHarness(t, []faux.Turn{faux.Text("one"), faux.Text("two"), faux.Text("the summary")},
		withModel(func(m llm.Model) llm.Model { held.Model = m; return held }),
		withConfig(func(c *gateway.Config) {
			c.Compaction = compaction.Settings{ReserveTokens: 1000, KeepRecentTokens: 1}
		}))
	var once sync.Once
	release := func() { once.Do(func() { close(held.release) }) }
	t.Cleanup(release)
	h.send("first")
	h.waitText(dmConv, "one")
	h.send("second")
	h.waitText(dmConv, "two")
	h.waitFor("the run to end", func() bool { return len(pendingOf(h)) == 0 })
	h.poll(h.inbound("/compact"), h.inbound("/help"), h.inbound("/whoami"))
	<-held.holding
	release()
	h.waitText(dmConv, "test:owner")
	var order []string
	for _, m := range h.ad.Messages(dmConv) {
		switch {
		case strings.Contains(m, "Compacted"):
			order = append(order, "compact")
		case strings.Contains(m, "/steer TEXT"):
			order = append(order, "help")
		case strings.Contains(m, "test:owner"):
			order = append(order, "whoami")
		}
	}
	if want := []string{"compact", "help", "whoami"}; !slices.Equal(order, want) {
		t.Errorf("replies in order %v, want %v", order, want)
	}
}
