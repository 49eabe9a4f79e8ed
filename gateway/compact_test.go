package gateway_test

import (
	"testing"

	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/gateway"
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
