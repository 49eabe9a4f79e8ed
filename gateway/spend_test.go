package gateway_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/spend"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// TestSpendCaps: a group member who reached their daily token cap is
// refused with a message naming the cap and its reset, without reaching
// the model and without losing the message; an owner is exempt, lifts
// the member's cap for today, and members cannot.
func TestSpendCaps(t *testing.T) {
	store, err := spend.OpenFile(filepath.Join(t.TempDir(), "spend.json"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 6, 22, 15, 0, 0, time.UTC)
	lim := spend.NewLimiter(store, spend.Caps{PerUser: spend.Cap{Tokens: 1500}}, func() time.Time { return now })
	big := llm.Usage{Input: 1400, Output: 200}
	h := newHarness(t, []faux.Turn{faux.Text("first answer").WithUsage(big), faux.Text("owner answer"), faux.Text("lifted answer")}, withSpend(lim))
	conv := chat.ConvRef{Platform: groupConv.Platform, Channel: groupConv.Channel, Thread: "spend"}

	h.send("hello", inConv(conv), from("bob"), mentioned())
	h.waitText(conv, "first answer")
	// The run is over once its message left the inbox; the next message
	// then starts a run of its own instead of steering this one.
	h.waitFor("the first run's end", func() bool { return len(pendingOf(h)) == 0 })

	h.send("again", inConv(conv), from("bob"), mentioned())
	h.waitText(conv, "limits.per_user.daily_tokens", "1600 of 1500 tokens", "00:00 UTC", "1h45m")
	if n := h.model.Calls(); n != 1 {
		t.Fatalf("model calls = %d after the refusal, want 1", n)
	}
	// The refused message is kept in the session.
	h.waitFor("the refused message in the session", func() bool {
		for _, p := range h.sessions() {
			for _, e := range h.entries(p) {
				if e.Message != nil && e.Message.Role == llm.RoleUser && strings.Contains(e.Message.Text(), "again") {
					return true
				}
			}
		}
		return false
	})

	// Owners are exempt.
	h.send("owner asks", inConv(conv), from("owner"), mentioned())
	h.waitText(conv, "owner answer")

	// A member cannot lift a cap; /limits shows them their usage.
	if got := h.answer(conv, "bob", "/limits lift user bob"); !strings.HasPrefix(got, "Only an owner") {
		t.Fatalf("member lifted a cap: %q", got)
	}
	if got := h.answer(conv, "bob", "/limits"); !strings.Contains(got, "per_user (for you): $0.0000, 1600 tokens; cap 1500 tokens") {
		t.Fatalf("/limits for a member: %q", got)
	}
	if got := h.answer(conv, "owner", "/limits raise user bob lots"); !strings.Contains(got, "is not an amount") {
		t.Fatalf("bad amount: %q", got)
	}
	if got := h.answer(conv, "owner", "/limits lift user bob"); !strings.Contains(got, "per_user spend cap is lifted until 00:00 UTC") {
		t.Fatalf("owner lift: %q", got)
	}
	h.send("third", inConv(conv), from("bob"), mentioned())
	h.waitText(conv, "lifted answer")
}

func TestLimitsWithoutCaps(t *testing.T) {
	h := newHarness(t, nil)
	if got := h.answer(dmConv, "owner", "/limits"); !strings.Contains(got, "No spend caps are configured") {
		t.Fatalf("/limits without a limiter: %q", got)
	}
}

// TestLimitsLiftInDMIsForOwners: in a DM everyone may use every command
// of their own conversation, but a cap is the owners' to lift.
func TestLimitsLiftInDMIsForOwners(t *testing.T) {
	store, err := spend.OpenFile(filepath.Join(t.TempDir(), "spend.json"))
	if err != nil {
		t.Fatal(err)
	}
	lim := spend.NewLimiter(store, spend.Caps{Global: spend.Cap{USD: 1}}, nil)
	h := newHarness(t, nil, withSpend(lim), func(h *harness) { h.policy.Users = append(h.policy.Users, "test:carol") })
	conv := chat.ConvRef{Platform: "test", Channel: "carol-dm", DM: true}
	for _, cmd := range []string{"/limits lift global", "/limits raise conversation $100"} {
		if got := h.answer(conv, "carol", cmd); got != "Only an owner of this bot can lift or raise a spend cap." {
			t.Errorf("%s by a user in their DM: %q", cmd, got)
		}
	}
	if got := h.answer(conv, "carol", "/limits"); !strings.Contains(got, "global (for the whole bot): $0.0000, 0 tokens; cap $1.00") {
		t.Errorf("/limits: %q", got)
	}
}
