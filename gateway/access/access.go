package access

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pibot/pibot/chat"
)

// Policy is the configured access rule set. Owners, Users and Groups hold
// "platform:id" strings; Groups may hold "*".
type Policy struct {
	Owners          []string
	Users           []string
	DMPolicy        string // pairing|allowlist|open|disabled
	Groups          []string
	MentionRequired bool
}

// Verdict is what to do with an inbound event.
type Verdict int

// Verdicts.
const (
	// Allow: process the event.
	Allow Verdict = iota
	// Ignore: drop silently (bots, unmentioned group chatter, unknown groups).
	Ignore
	// Pair: an unknown DM sender; reply with the pairing text, do not process.
	Pair
	// Deny: reply with the reason, do not process.
	Deny
)

// Decision is a verdict with the text to send back, if any.
type Decision struct {
	Verdict Verdict
	Reply   string
	// Err is set when the decision could not be made (the pairing store
	// failed); the verdict is then Ignore, and the caller logs Err.
	Err error
}

// Pairings holds pairing requests and paired users: the file Store, or a
// store the replicas of a cluster share. RequestCode keeps the limits of
// the pairing flow (CodeTTL, CodeCooldown, MaxPendingPer) and reports them
// with ErrCooldown and ErrTooManyPending.
type Pairings interface {
	RequestCode(ctx context.Context, platform, user, name string) (code string, created bool, err error)
	Approved(ctx context.Context, platform, user string) (bool, error)
}

// ConvPairings is a pairing store that also remembers the direct
// conversation each code was asked for in, so the user can be told there
// once approved (the file Store does).
type ConvPairings interface {
	RequestCodeIn(ctx context.Context, conv chat.ConvRef, user, name string) (code string, created bool, err error)
}

var _ ConvPairings = (*Store)(nil)

// Checker applies a Policy and the pairing store. The policy can be
// replaced while the checker is in use (SetPolicy: a configuration
// reload); each decision reads one policy.
type Checker struct {
	current atomic.Pointer[Policy]
	store   Pairings
	now     func() time.Time

	mu      sync.Mutex
	aliases map[string]string // new "platform:chat" -> the listed one
	reshown map[string]reshow // "platform:user" -> their re-shows of a pending code
}

// reshow is one stranger's bucket of re-shows of their pending code.
type reshow struct {
	tokens float64
	last   time.Time
}

// A stranger who asks again while their code is valid is shown the same
// code: ReshowBurst times at once, then once per ReshowEvery (per process).
// Messages beyond that get no answer, so a stranger cannot make the bot
// post without end.
const (
	ReshowBurst = 3
	ReshowEvery = time.Minute
)

// NewChecker returns a checker; store may be nil (no pairing).
func NewChecker(p Policy, store Pairings) *Checker {
	c := &Checker{store: store, now: time.Now}
	c.SetPolicy(p)
	return c
}

// SetPolicy replaces the policy (access lists, DM policy, groups, the
// mention rule); pairings and aliases stay.
func (c *Checker) SetPolicy(p Policy) {
	if p.DMPolicy == "" {
		p.DMPolicy = "pairing"
	}
	p.Owners, p.Users, p.Groups = slices.Clone(p.Owners), slices.Clone(p.Users), slices.Clone(p.Groups)
	c.current.Store(&p)
}

// policy returns the policy in force.
func (c *Checker) policy() *Policy { return c.current.Load() }

func key(platform chat.Platform, id string) string { return string(platform) + ":" + id }

// IsOwner reports whether the user is an owner.
func (c *Checker) IsOwner(platform chat.Platform, user string) bool {
	return slices.Contains(c.policy().Owners, key(platform, user))
}

// Known reports whether the user is an owner, an allowed user or paired.
// When the pairing store fails, the user is not known and the error says
// why.
func (c *Checker) Known(ctx context.Context, platform chat.Platform, user string) (bool, error) {
	k := key(platform, user)
	if pol := c.policy(); slices.Contains(pol.Owners, k) || slices.Contains(pol.Users, k) {
		return true, nil
	}
	if c.store == nil {
		return false, nil
	}
	ok, err := c.store.Approved(ctx, string(platform), user)
	if err != nil {
		return false, fmt.Errorf("access: pairing store: %w", err)
	}
	return ok, nil
}

// Check decides about one inbound event, by its own sender. When the
// pairing store fails the event is ignored and Decision.Err says why.
func (c *Checker) Check(ctx context.Context, in chat.Inbound) Decision {
	return c.decide(ctx, in, true)
}

// Allows reports whether Check would let in through, without its side
// effects: a stranger is not given a pairing code. A scheduled prompt's
// firing asks it before anything is posted.
func (c *Checker) Allows(ctx context.Context, in chat.Inbound) (bool, error) {
	d := c.decide(ctx, in, false)
	return d.Verdict == Allow, d.Err
}

// notEnabled answers a command invoked through the platform (a slash
// command, which waits for an answer) in a group the bot may not serve.
// It names nothing of the configuration.
const notEnabled = "I'm not enabled in this channel."

// decide is Check; pairing false never asks the pairing store for a code.
func (c *Checker) decide(ctx context.Context, in chat.Inbound, pairing bool) Decision {
	if in.User.IsBot || in.User.ID == "" {
		return Decision{Verdict: Ignore}
	}
	p := in.Conv.Platform
	if in.Conv.DM {
		known, err := c.Known(ctx, p, in.User.ID)
		if err != nil {
			return Decision{Verdict: Ignore, Err: err}
		}
		if known {
			return Decision{Verdict: Allow}
		}
		switch c.policy().DMPolicy {
		case "open":
			return Decision{Verdict: Allow}
		case "pairing":
			// A scheduled prompt's creator who lost access is not
			// sent a code: nobody asked for one.
			if !pairing || in.Schedule != "" {
				return Decision{Verdict: Ignore}
			}
			return c.pair(ctx, in)
		default: // allowlist, disabled
			return Decision{Verdict: Ignore}
		}
	}
	// Only owners may use the bot in a group that is not listed; a paired
	// or listed user is allowed in DMs and in listed groups only. A listed
	// workspace (a Discord guild, "discord:<guild id>") lists all its
	// channels.
	listed := c.GroupAllowed(p, in.Conv.Channel) || (in.Conv.Workspace != "" && c.GroupAllowed(p, in.Conv.Workspace))
	if !listed && !c.IsOwner(p, in.User.ID) {
		if in.Command != nil && in.Interaction != nil {
			// A slash command waits for an answer; silence would show
			// the user nothing at all.
			return Decision{Verdict: Deny, Reply: notEnabled}
		}
		return Decision{Verdict: Ignore}
	}
	// Inside a thread the bot already takes part in (chat.Inbound.Bound),
	// people talk to it without mentioning it; a main line still needs one.
	boundThread := in.Bound && in.Conv.Thread != ""
	if in.Kind == chat.KindMessage && c.policy().MentionRequired && !in.Mentioned && !in.ReplyToBot && in.Command == nil && !boundThread {
		return Decision{Verdict: Ignore}
	}
	return Decision{Verdict: Allow}
}

// GroupAllowed reports whether a group chat is listed in Groups (or "*"),
// directly or as the new id of a listed group that moved.
func (c *Checker) GroupAllowed(platform chat.Platform, channel string) bool {
	return slices.Contains(c.policy().Groups, "*") || slices.Contains(c.policy().Groups, c.resolve(key(platform, channel)))
}

// Alias makes a group that moved (a Telegram group that became a
// supergroup) keep the access of its old id until the config is updated.
func (c *Checker) Alias(platform chat.Platform, oldID, newID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aliases == nil {
		c.aliases = map[string]string{}
	}
	c.aliases[key(platform, newID)] = c.resolveLocked(key(platform, oldID))
}

func (c *Checker) resolve(k string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resolveLocked(k)
}

func (c *Checker) resolveLocked(k string) string {
	if old, ok := c.aliases[k]; ok {
		return old
	}
	return k
}

func (c *Checker) pair(ctx context.Context, in chat.Inbound) Decision {
	if c.store == nil {
		return Decision{Verdict: Ignore}
	}
	var (
		code    string
		created bool
		err     error
	)
	if cs, ok := c.store.(ConvPairings); ok {
		code, created, err = cs.RequestCodeIn(ctx, in.Conv, in.User.ID, in.User.Name)
	} else {
		code, created, err = c.store.RequestCode(ctx, string(in.Conv.Platform), in.User.ID, in.User.Name)
	}
	if errors.Is(err, ErrCooldown) || errors.Is(err, ErrTooManyPending) {
		return Decision{Verdict: Ignore} // the limits of the flow: silence
	}
	if err != nil {
		return Decision{Verdict: Ignore, Err: fmt.Errorf("access: pairing store: %w", err)}
	}
	if !created && !c.mayReshow(key(in.Conv.Platform, in.User.ID)) {
		return Decision{Verdict: Ignore}
	}
	validity := "valid for 1 hour"
	if !created {
		validity = "the same code as before, valid 1 hour from when you first got it"
	}
	return Decision{Verdict: Pair, Reply: fmt.Sprintf(
		"I don't know you yet. Your pairing code is **%s** (%s).\n\nAsk the owner of this bot to run:\n\n`pibot pairing approve %s %s`",
		code, validity, in.Conv.Platform, code)}
}

// mayReshow takes a re-show of user k's pending code from their bucket
// (ReshowBurst, one more per ReshowEvery); false when it is empty.
// Buckets untouched for CodeTTL are dropped: their codes have expired.
func (c *Checker) mayReshow(k string) bool {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reshown == nil {
		c.reshown = map[string]reshow{}
	}
	for u, r := range c.reshown {
		if now.Sub(r.last) >= CodeTTL {
			delete(c.reshown, u)
		}
	}
	r, ok := c.reshown[k]
	if !ok {
		r = reshow{tokens: ReshowBurst, last: now}
	}
	r.tokens = min(ReshowBurst, r.tokens+now.Sub(r.last).Seconds()/ReshowEvery.Seconds())
	r.last = now
	if r.tokens < 1 {
		c.reshown[k] = r
		return false
	}
	r.tokens--
	c.reshown[k] = r
	return true
}
