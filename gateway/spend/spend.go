// Package spend enforces daily spend caps on model usage: per user, per
// conversation and for the whole bot, in US dollars and in tokens,
// counted per UTC day.
//
// A Limiter holds the caps (swappable, for a configuration reload) and
// keeps its counts in a Store: the embedded FileStore writes them to one
// small file, and a store shared by replicas (cluster mode) implements the
// same interface and passes spendtest.RunStoreTests (cluster mode's is
// cluster/rediscluster/redisspend).
package spend

import (
	"context"
	"fmt"
	"time"
)

// Scope is what a cap counts.
type Scope string

// The scopes of the caps.
const (
	PerUser         Scope = "per_user"
	PerConversation Scope = "per_conversation"
	Global          Scope = "global"
)

// Scopes lists every scope, in the order they are checked and shown.
var scopes = [...]Scope{PerUser, PerConversation, Global}

// Amount is usage: a cost and a token count.
type Amount struct {
	USD    float64 `json:"usd"`
	Tokens int64   `json:"tokens"`
}

// Add returns a + b.
func (a Amount) Add(b Amount) Amount { return Amount{USD: a.USD + b.USD, Tokens: a.Tokens + b.Tokens} }

// Sub returns a - b.
func (a Amount) Sub(b Amount) Amount { return Amount{USD: a.USD - b.USD, Tokens: a.Tokens - b.Tokens} }

// Fits reports whether used + a stays within c (a zero field of c is no
// limit). Dollars are compared with a tolerance of a millionth of a cent
// against the rounding of float sums.
func (c Cap) Fits(used, a Amount) bool {
	if c.USD > 0 && used.USD+a.USD > c.USD+1e-8 {
		return false
	}
	return c.Tokens <= 0 || used.Tokens+a.Tokens <= c.Tokens
}

// Cap is one day's cap. Zero fields are no cap.
type Cap struct {
	USD    float64 `json:"usd"`
	Tokens int64   `json:"tokens"`
}

// Caps are the configured caps of each scope.
type Caps struct {
	PerUser         Cap
	PerConversation Cap
	Global          Cap
}

// Of returns the cap of scope s.
func (c Caps) Of(s Scope) Cap {
	switch s {
	case PerUser:
		return c.PerUser
	case PerConversation:
		return c.PerConversation
	default:
		return c.Global
	}
}

// Override is what an owner set for one key for one day: Lifted removes
// the cap, otherwise Cap replaces the configured one.
type Override struct {
	Lifted bool `json:"lifted,omitempty"`
	Cap    Cap  `json:"cap"`
}

// Store keeps each day's usage and overrides per key. Keys are opaque
// ("user:telegram:42", "conv:…", "global"); day is "2006-01-02" (UTC).
// Every method takes a context and returns an error, as a network store
// needs.
type Store interface {
	// Add adds a to the usage of every key on day. a may be negative:
	// settling a reservation gives back what it held beyond the actual
	// usage.
	Add(ctx context.Context, day string, keys []string, a Amount) error
	// Reserve adds a to the usage of every key on day, atomically, only
	// if no key would pass its cap: for each i, usage[i] + a stays within
	// caps[i] (a zero field of a cap is no limit; len(caps) ==
	// len(keys)). It reports whether it added, and the usage of each key
	// it compared (without a). Callers that reserve at once, in one
	// process or on several replicas, never pass a cap together.
	Reserve(ctx context.Context, day string, keys []string, caps []Cap, a Amount) (ok bool, used []Amount, err error)
	// Usage returns the usage of each key on day (zero when none).
	Usage(ctx context.Context, day string, keys []string) ([]Amount, error)
	// SetOverride records an override of key for day.
	SetOverride(ctx context.Context, day, key string, o Override) error
	// Overrides returns the overrides of the keys on day (zero: none).
	Overrides(ctx context.Context, day string, keys []string) ([]Override, error)
}

// Who names the user and conversation a run is for.
type Who struct {
	// User is "platform:user id".
	User string
	// Conv is the chat location's key.
	Conv string
	// Agent is the agent whose usage it is ("": none): counted per agent
	// as well (read with Report), under the agent's caps if it has any
	// (Limiter.SetAgentCaps).
	Agent string
}

// agentKeys returns the store keys of w's use of its agent in scope
// order: this user's, this conversation's and everyone's (none without
// an agent).
func (w Who) agentKeys() []string {
	if w.Agent == "" {
		return nil
	}
	a := "agent:" + w.Agent
	return []string{a + ":user:" + w.User, a + ":conv:" + w.Conv, a}
}

// keys returns the store keys of w in scope order.
func (w Who) keys() []string {
	return []string{"user:" + w.User, "conv:" + w.Conv, "global"}
}

// day is the UTC day of t.
func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// nextReset is the next UTC midnight after t.
func nextReset(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// Refusal says which cap a run would pass; its Error is the message for
// the chat.
type Refusal struct {
	Scope Scope
	// Agent is the agent whose cap it is (agents.NAME.spend), "" for the
	// gateway-wide caps (limits); Key is then the cap's config key prefix.
	Agent, Key string
	// USD: the dollar cap (else the token cap).
	USD bool
	Cap Cap
	// Used is the usage counted (and held for calls in flight).
	Used Amount
	// Next is the estimate of the model call refused (Limiter.Reserve);
	// zero when a run is refused before it starts (Limiter.Check).
	Next Amount
	// ResetsAt is the next UTC midnight; ResetsIn the time until then.
	ResetsAt time.Time
	ResetsIn time.Duration
}

func (r *Refusal) Error() string {
	var what string
	if r.USD {
		what = fmt.Sprintf("$%.2f of $%.2f", r.Used.USD, r.Cap.USD)
	} else {
		what = fmt.Sprintf("%d of %d tokens", r.Used.Tokens, r.Cap.Tokens)
	}
	in := r.ResetsIn.Round(time.Minute)
	key := map[bool]string{true: "daily_usd", false: "daily_tokens"}[r.USD]
	state := fmt.Sprintf("is reached: %s used today", what)
	if r.Next != (Amount{}) {
		next := fmt.Sprintf("%d tokens", r.Next.Tokens)
		if r.USD {
			next = fmt.Sprintf("$%.2f", r.Next.USD)
		}
		state = fmt.Sprintf("leaves no room for the next model call: %s used today (calls in flight included), and the call needs about %s", what, next)
	}
	prefix, who, lift := "limits", words(r.Scope), "An owner can lift it for today with /limits."
	if r.Agent != "" {
		prefix, who, lift = r.Key, "of agent `"+r.Agent+"` "+agentWords(r.Scope), "An owner can raise it in the configuration file."
	}
	return fmt.Sprintf("⛔ The daily spend cap %s (%s.%s.%s) %s. It resets at 00:00 UTC (in %dh%02dm). %s",
		who, prefix, r.Scope, key, state, int(in.Hours()), int(in.Minutes())%60, lift)
}

// words describes a scope in a sentence.
func words(s Scope) string {
	switch s {
	case PerUser:
		return "for you"
	case PerConversation:
		return "for this conversation"
	default:
		return "for the whole bot"
	}
}
