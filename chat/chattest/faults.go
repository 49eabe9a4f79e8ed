package chattest

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/pibot/pibot/chat"
)

// RateLimit is a rate model: in one conversation, at most Max calls of
// Methods (all methods if empty) are accepted per sliding Window; a further
// call fails with a chat-scoped *chat.RateLimitError whose RetryAfter is the
// time until the oldest accepted call leaves the window.
type RateLimit struct {
	Methods []Method
	Max     int
	Window  time.Duration
}

// Violation is a call that arrived before an announced retry-after expired.
// The adapter answers such a call with another *chat.RateLimitError.
type Violation struct {
	Call Call
	// Until is when the announced pause ended.
	Until time.Time
}

// FailNext makes the next n calls of m fail with err (for example
// RateLimited(5*time.Second), ErrServer or chat.ErrNotFound). Calls repeat:
// FailNext(m, 2, e1) then FailNext(m, 1, e2) fails with e1, e1, e2.
func (a *Adapter) FailNext(m Method, n int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range n {
		a.faults[m] = append(a.faults[m], err)
	}
}

// beginLocked decides whether call c may proceed: it stamps c.Time, checks
// announced pauses (recording violations), injected faults and the rate
// model. On failure it records c with its error and returns it. msgKey is
// the message the call touches, "" if none.
func (a *Adapter) beginLocked(c *Call, msgKey string) error {
	now := a.now()
	c.Time = now
	err := a.admitLocked(c, msgKey, now)
	if err == nil {
		return nil
	}
	if rl, ok := errors.AsType[*chat.RateLimitError](err); ok {
		key := c.Conv.Key()
		if rl.Scope == "message" && msgKey != "" {
			key = msgKey
		}
		if until := now.Add(rl.RetryAfter); until.After(a.blocked[key]) {
			a.blocked[key] = until
		}
	}
	c.Err = err
	a.recordLocked(*c)
	return err
}

func (a *Adapter) admitLocked(c *Call, msgKey string, now time.Time) error {
	hasConv := c.Conv != (chat.ConvRef{})
	if hasConv {
		for _, key := range []string{c.Conv.Key(), msgKey} {
			until, ok := a.blocked[key]
			if key == "" || !ok || !now.Before(until) {
				continue
			}
			a.violations = append(a.violations, Violation{Call: *c, Until: until})
			return &chat.RateLimitError{RetryAfter: until.Sub(now), Scope: "chat"}
		}
	}
	if q := a.faults[c.Method]; len(q) > 0 {
		a.faults[c.Method] = q[1:]
		return q[0]
	}
	if !hasConv {
		return nil
	}
	for i, l := range a.limits {
		if len(l.Methods) > 0 && !slices.Contains(l.Methods, c.Method) {
			continue
		}
		key := strconv.Itoa(i) + "|" + c.Conv.Key()
		w := a.windows[key]
		for len(w) > 0 && !now.Before(w[0].Add(l.Window)) {
			w = w[1:]
		}
		if len(w) >= l.Max {
			a.windows[key] = w
			return &chat.RateLimitError{RetryAfter: w[0].Add(l.Window).Sub(now), Scope: "chat"}
		}
		a.windows[key] = append(w, now)
	}
	return nil
}

// Violations returns the calls that ignored an announced retry-after.
func (a *Adapter) Violations() []Violation {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.violations)
}
