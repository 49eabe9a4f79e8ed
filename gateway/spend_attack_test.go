package gateway_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/spend"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// ledger is the gateway's spend limiter (a real spend.Limiter over the
// file store) with a count of the model calls it let through: how many
// were in flight when the last one was granted, and the most any call
// used beyond what it held. The README's bound on a cap's overshoot is
// in these terms: at most one call per run in flight, each by what it
// used beyond its estimate.
type ledger struct {
	*spend.Limiter
	store *spend.FileStore

	mu        sync.Mutex
	flying    int // holds granted and not settled
	atLast    int // holds in flight when the last one was granted
	maxExcess int64
	granted   int
	refused   int
}

func newLedger(t *testing.T, caps spend.Caps, now time.Time) *ledger {
	t.Helper()
	store, err := spend.OpenFile(filepath.Join(t.TempDir(), "spend.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return &ledger{Limiter: spend.NewLimiter(store, caps, func() time.Time { return now }), store: store}
}

func (l *ledger) Reserve(ctx context.Context, w spend.Who, a spend.Amount) (spend.Hold, error) {
	h, err := l.Limiter.Reserve(ctx, w, a)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.refused++
		return h, err
	}
	l.granted++
	l.flying++
	l.atLast = l.flying
	return h, nil
}

func (l *ledger) Settle(ctx context.Context, h spend.Hold, actual spend.Amount) error {
	l.mu.Lock()
	l.flying--
	l.maxExcess = max(l.maxExcess, actual.Tokens-h.Amount().Tokens)
	l.mu.Unlock()
	return l.Limiter.Settle(ctx, h, actual)
}

// tokens is what user has used today.
func (l *ledger) tokens(t *testing.T, day time.Time, user string) int64 {
	t.Helper()
	u, err := l.store.Usage(t.Context(), day.Format(time.DateOnly), []string{"user:test:" + user})
	if err != nil {
		t.Fatal(err)
	}
	return u[0].Tokens
}

// bound is the most a cap may be passed by, per the README.
func (l *ledger) bound() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.atLast) * l.maxExcess
}

// TestSpendCapConcurrentMentions replays issue 30.5's first attack
// through the gateway: one group member mentions the bot in six threads
// at once (six runs in parallel). The cap was checked only when a run
// started, so all six ran: 3,597 of a 4,000-token cap became 15,531. Now
// every model call reserves its estimate first, atomically: at 3,597 no
// call fits any more; from zero, the runs that fit go and the others are
// refused, and the total passes the cap by at most what the calls in
// flight used beyond their estimates.
func TestSpendCapConcurrentMentions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	const capTokens = 4000
	lim := newLedger(t, spend.Caps{PerUser: spend.Cap{Tokens: capTokens}}, now)
	// Each answer reports 1,989 tokens, as in the attack (11,934 over six).
	answer := faux.Text("a long answer that takes a while").WithDelay(40 * time.Millisecond).WithUsage(llm.Usage{Input: 1800, Output: 189})
	h := newHarness(t, []faux.Turn{answer}, withSpend(lim))
	threads := func(user string) []chat.ConvRef {
		out := make([]chat.ConvRef, 6)
		for i := range out {
			out[i] = chat.ConvRef{Platform: groupConv.Platform, Channel: groupConv.Channel, Thread: fmt.Sprintf("%s-%d", user, i)}
		}
		return out
	}
	mentionAll := func(user string) {
		for _, c := range threads(user) {
			h.send("write me an essay", inConv(c), from(user), mentioned())
		}
		for _, c := range threads(user) {
			h.waitFor("an answer or a refusal in "+c.Thread, func() bool {
				for _, m := range h.ad.Messages(c) {
					if strings.Contains(m, "a long answer") || strings.Contains(m, "⛔") {
						return true
					}
				}
				return false
			})
		}
		h.waitFor("every run's end", func() bool { return len(pendingOf(h)) == 0 })
	}

	// The attack as it was: 3,597 used already.
	if err := lim.Record(t.Context(), spend.Who{User: "test:mallory", Conv: "elsewhere"}, spend.Amount{Tokens: 3597}); err != nil {
		t.Fatal(err)
	}
	mentionAll("mallory")
	if got := lim.tokens(t, now, "mallory"); got != 3597 {
		t.Errorf("mallory's usage after six concurrent mentions = %d, want 3597 (no call fits in the 403 tokens left)", got)
	}
	if n := h.model.Calls(); n != 0 {
		t.Errorf("the model was called %d times for mallory, want 0", n)
	}
	h.waitText(threads("mallory")[0], "limits.per_user.daily_tokens", "leaves no room for the next model call", "3597 of 4000 tokens")

	// From zero: the calls that fit run, the rest are refused.
	mentionAll("trudy")
	used := lim.tokens(t, now, "trudy")
	calls := h.model.Calls()
	bound := lim.bound()
	t.Logf("trudy: %d model calls, %d of %d tokens; bound %d (%d in flight at the last grant, %d tokens beyond an estimate at most)",
		calls, used, capTokens, bound, lim.atLast, lim.maxExcess)
	if calls == 0 || calls == 6 {
		t.Errorf("model calls = %d, want some but not all six runs to fit the cap", calls)
	}
	if used > capTokens+bound {
		t.Errorf("trudy used %d tokens of a %d cap: more than the bound of %d over it", used, capTokens, bound)
	}
	if lim.atLast > 6 {
		t.Errorf("%d calls in flight at once for six runs", lim.atLast)
	}
}

// TestSpendCapSteeredToolLoop replays issue 30.5's second attack: a
// paired user keeps one run going with tool calls and steering messages.
// Checked only at the run's start, twelve model calls reached 28,157
// tokens of a 3,000-token cap. Now the call that would pass the cap is
// refused: the run ends there, and the reply says which cap stopped it.
func TestSpendCapSteeredToolLoop(t *testing.T) {
	now := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	const capTokens = 3000
	lim := newLedger(t, spend.Caps{PerUser: spend.Cap{Tokens: capTokens}}, now)
	// Each call reports 2,346 tokens (28,157 over twelve in the attack).
	use := llm.Usage{Input: 2200, Output: 146}
	var script []faux.Turn
	for i := range 12 {
		script = append(script, faux.ToolCalls(faux.Call(fmt.Sprintf("c%d", i), "step", `{}`)).WithUsage(use))
	}
	script = append(script, faux.Text("done at last").WithUsage(use))
	g := newGate()
	h := newHarness(t, script, withSpend(lim), withTools(g.tool("step")),
		func(h *harness) { h.policy.Users = append(h.policy.Users, "test:mallory") })
	dm := chat.ConvRef{Platform: "test", Channel: "mallory-dm", DM: true}

	h.send("run step until I say stop", inConv(dm), from("mallory"))
	<-g.started
	h.send("keep going, call it again", inConv(dm), from("mallory")) // steered into the run
	h.waitFor("the steering message queued", func() bool { return len(pendingOf(h)) == 2 })
	close(g.release)
	h.waitText(dm, "⛔ The daily spend cap for you (limits.per_user.daily_tokens) leaves no room for the next model call")
	h.waitFor("the run's end", func() bool { return len(pendingOf(h)) == 0 })

	used := lim.tokens(t, now, "mallory")
	if n := h.model.Calls(); n != 1 {
		t.Errorf("model calls = %d, want 1 (the second would pass the cap)", n)
	}
	if used > capTokens+lim.bound() {
		t.Errorf("mallory used %d tokens of a %d cap, more than the bound %d over it", used, capTokens, lim.bound())
	}
	t.Logf("mallory: %d model calls, %d of %d tokens", h.model.Calls(), used, capTokens)
	// The steering message is kept in the session, as a refused run's.
	h.waitFor("the steering message in the session", func() bool {
		for _, p := range h.sessions() {
			for _, txt := range userTexts(h.entries(p)) {
				if strings.Contains(txt, "keep going") {
					return true
				}
			}
		}
		return false
	})
}
