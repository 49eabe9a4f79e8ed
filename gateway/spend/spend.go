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
	// Add adds a to the usage of every key on day.
	Add(ctx context.Context, day string, keys []string, a Amount) error
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
	// USD: the dollar cap (else the token cap).
	USD  bool
	Cap  Cap
	Used Amount
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
	return fmt.Sprintf("⛔ The daily spend cap %s (limits.%s.%s) is reached: %s used today. It resets at 00:00 UTC (in %dh%02dm). An owner can lift it for today with /limits.",
		words(r.Scope), r.Scope, map[bool]string{true: "daily_usd", false: "daily_tokens"}[r.USD], what, int(in.Hours()), int(in.Minutes())%60)
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
