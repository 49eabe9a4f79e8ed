package spend

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Limiter checks runs against the caps and counts their usage. It is safe
// for concurrent use.
type Limiter struct {
	store Store
	caps  atomic.Pointer[Caps]
	// agents are the agents' caps by name (SetAgentCaps).
	agents atomic.Pointer[map[string]AgentCaps]
	now    func() time.Time
}

// NewLimiter returns a limiter over store; now is the clock (nil:
// time.Now).
func NewLimiter(store Store, caps Caps, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	l := &Limiter{store: store, now: now}
	l.caps.Store(&caps)
	return l
}

// SetCaps replaces the caps (a configuration reload); counts and today's
// overrides stay.
func (l *Limiter) SetCaps(c Caps) { l.caps.Store(&c) }

// Caps returns the configured caps.
func (l *Limiter) Caps() Caps { return *l.caps.Load() }

// allKeys returns the store keys of w: the gateway-wide scopes', then
// its agent's (Who.agentKeys).
func (w Who) allKeys() []string { return append(w.keys(), w.agentKeys()...) }

// effective returns the caps in force for w today, one for each of
// w.allKeys(): the gateway-wide ones (with today's overrides), then its
// agent's.
func (l *Limiter) effective(ctx context.Context, today string, w Who) ([]Cap, error) {
	ovs, err := l.store.Overrides(ctx, today, w.keys())
	if err != nil {
		return nil, fmt.Errorf("spend: overrides: %w", err)
	}
	caps := l.Caps()
	out := make([]Cap, len(scopes))
	for i, s := range scopes {
		switch o := ovs[i]; {
		case o.Lifted:
		case o.Cap != (Cap{}):
			out[i] = o.Cap
		default:
			out[i] = caps.Of(s)
		}
	}
	if w.Agent != "" {
		ac := l.agentCaps(w.Agent)
		for _, s := range scopes {
			out = append(out, ac.Of(s))
		}
	}
	return out, nil
}

// none reports whether no cap of caps is in force.
func none(caps []Cap) bool {
	for _, c := range caps {
		if c != (Cap{}) {
			return false
		}
	}
	return true
}

// refusal is the refusal of w's cap i of effective (a gateway-wide scope,
// then the agent's), with usage used, at now; next is the estimate of
// the call refused (zero: a run refused before it starts).
func (l *Limiter) refusal(w Who, i int, c Cap, used, next Amount, usd bool, now time.Time) *Refusal {
	reset := nextReset(now)
	r := &Refusal{Scope: scopes[i%len(scopes)], USD: usd, Cap: c, Used: used, Next: next, ResetsAt: reset, ResetsIn: reset.Sub(now)}
	if i >= len(scopes) {
		r.Agent, r.Key = w.Agent, l.agentCaps(w.Agent).Key
	}
	return r
}

// Check returns a *Refusal when w has reached a cap in force today, and
// nil when the run may go. An error reading the store is returned as is
// (the caller decides; the gateway lets the run go and logs it).
func (l *Limiter) Check(ctx context.Context, w Who) error {
	now := l.now()
	today := day(now)
	caps, err := l.effective(ctx, today, w)
	if err != nil {
		return err
	}
	if none(caps) {
		return nil
	}
	used, err := l.store.Usage(ctx, today, w.allKeys())
	if err != nil {
		return fmt.Errorf("spend: usage: %w", err)
	}
	for i, c := range caps {
		u := used[i]
		usd := c.USD > 0 && u.USD >= c.USD
		if usd || c.Tokens > 0 && u.Tokens >= c.Tokens {
			return l.refusal(w, i, c, u, Amount{}, usd, now)
		}
	}
	return nil
}

// Hold is usage reserved for one model call (Limiter.Reserve) until
// Settle replaces it with what the call used.
type Hold struct {
	day  string
	keys []string
	a    Amount
}

// Amount is what the hold reserved.
func (h Hold) Amount() Amount { return h.a }

// Reserve holds a, the estimate of w's next model call, against the caps
// in force today, in one atomic step of the store: when the call would
// pass a cap it returns a *Refusal (with Next set) and holds nothing. With
// no cap in force it holds nothing and lets the call go. Errors reading
// the store are returned as is, as Check's.
func (l *Limiter) Reserve(ctx context.Context, w Who, a Amount) (Hold, error) {
	now := l.now()
	today := day(now)
	h := Hold{day: today, keys: w.allKeys()}
	caps, err := l.effective(ctx, today, w)
	if err != nil {
		return h, err
	}
	if none(caps) {
		return h, nil
	}
	ok, used, err := l.store.Reserve(ctx, today, h.keys, caps, a)
	if err != nil {
		return h, fmt.Errorf("spend: reserve: %w", err)
	}
	if ok {
		h.a = a
		return h, nil
	}
	for i, c := range caps {
		u := used[i]
		if c.Fits(u, a) {
			continue
		}
		return h, l.refusal(w, i, c, u, a, !Cap{USD: c.USD}.Fits(u, a), now)
	}
	// The store refused, yet every cap fits what it read: the usage
	// changed in between (another replica). Refused all the same.
	reset := nextReset(now)
	return h, &Refusal{Scope: PerUser, Cap: caps[0], Used: used[0], Next: a, ResetsAt: reset, ResetsIn: reset.Sub(now)}
}

// Settle counts a call's actual usage in place of what h held, on the
// hold's day (a call that ends after midnight counts for the day it
// started).
func (l *Limiter) Settle(ctx context.Context, h Hold, actual Amount) error {
	d := actual.Sub(h.a)
	if d == (Amount{}) || len(h.keys) == 0 {
		return nil
	}
	if err := l.store.Add(ctx, h.day, h.keys, d); err != nil {
		return fmt.Errorf("spend: settle: %w", err)
	}
	return nil
}

// Record counts a on w's user, conversation, the global total and its
// agent's counts today.
func (l *Limiter) Record(ctx context.Context, w Who, a Amount) error {
	if a == (Amount{}) {
		return nil
	}
	if err := l.store.Add(ctx, day(l.now()), w.allKeys(), a); err != nil {
		return fmt.Errorf("spend: record: %w", err)
	}
	return nil
}

// Override sets scope's cap for w for the rest of today (UTC): lifted, or
// replaced by c.
func (l *Limiter) Override(ctx context.Context, w Who, s Scope, o Override) error {
	i := indexOf(s)
	if i < 0 {
		return fmt.Errorf("spend: unknown scope %q", s)
	}
	if err := l.store.SetOverride(ctx, day(l.now()), w.keys()[i], o); err != nil {
		return fmt.Errorf("spend: override: %w", err)
	}
	return nil
}

// Report describes today's usage and caps for w, one line per scope.
func (l *Limiter) Report(ctx context.Context, w Who) (string, error) {
	now := l.now()
	today := day(now)
	caps, err := l.effective(ctx, today, w)
	if err != nil {
		return "", err
	}
	ovs, err := l.store.Overrides(ctx, today, w.keys())
	if err != nil {
		return "", fmt.Errorf("spend: overrides: %w", err)
	}
	used, err := l.store.Usage(ctx, today, w.keys())
	if err != nil {
		return "", fmt.Errorf("spend: usage: %w", err)
	}
	var b strings.Builder
	in := nextReset(now).Sub(now).Round(time.Minute)
	fmt.Fprintf(&b, "**Spend today** (UTC day %s, resets at 00:00 UTC, in %dh%02dm)", today, int(in.Hours()), int(in.Minutes())%60)
	for i, s := range scopes {
		fmt.Fprintf(&b, "\n- %s (%s): $%.4f, %d tokens", s, words(s), used[i].USD, used[i].Tokens)
		c := caps[i]
		switch {
		case ovs[i].Lifted:
			b.WriteString("; cap lifted for today")
		case c == (Cap{}):
			b.WriteString("; no cap")
		default:
			var parts []string
			if c.USD > 0 {
				parts = append(parts, fmt.Sprintf("$%.2f", c.USD))
			}
			if c.Tokens > 0 {
				parts = append(parts, fmt.Sprintf("%d tokens", c.Tokens))
			}
			b.WriteString("; cap " + strings.Join(parts, " and "))
			if ovs[i].Cap != (Cap{}) {
				b.WriteString(" (raised for today)")
			}
		}
	}
	if keys := w.agentKeys(); len(keys) > 0 {
		used, err := l.store.Usage(ctx, today, keys)
		if err != nil {
			return "", fmt.Errorf("spend: usage: %w", err)
		}
		ac := l.agentCaps(w.Agent)
		// The agent's use by this user and in this conversation are shown
		// where the agent caps them.
		for i, s := range scopes[:2] {
			if c := ac.Of(s); c != (Cap{}) {
				fmt.Fprintf(&b, "\n- agent `%s` %s (%s.%s): $%.4f, %d tokens; %s", w.Agent, agentWords(s), ac.Key, s, used[i].USD, used[i].Tokens, capText(c))
			}
		}
		g := used[len(scopes)-1]
		fmt.Fprintf(&b, "\n- agent `%s` (everyone's use of this agent): $%.4f, %d tokens; %s", w.Agent, g.USD, g.Tokens, capText(ac.Global))
	}
	return b.String(), nil
}

func indexOf(s Scope) int {
	for i, x := range scopes {
		if x == s {
			return i
		}
	}
	return -1
}

// ParseScope accepts a scope as /limits takes it: user, conversation
// (conv), global, or the config names.
func ParseScope(s string) (Scope, bool) {
	switch strings.ToLower(s) {
	case "user", "per_user":
		return PerUser, true
	case "conversation", "conv", "per_conversation":
		return PerConversation, true
	case "global":
		return Global, true
	}
	return "", false
}
