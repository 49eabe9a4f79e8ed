package gateway

import (
	"context"
	"errors"
	"log/slog"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/spend"
	"github.com/pibot/pibot/llm"
)

// SpendLimiter enforces the daily spend caps (spend.Limiter, over a store
// a cluster can share).
type SpendLimiter interface {
	// Check returns a *spend.Refusal when w reached a cap in force.
	Check(ctx context.Context, w spend.Who) error
	// Record counts usage.
	Record(ctx context.Context, w spend.Who, a spend.Amount) error
	// Override lifts or raises one of w's caps for the rest of today.
	Override(ctx context.Context, w spend.Who, s spend.Scope, o spend.Override) error
	// Report describes today's usage and caps for w.
	Report(ctx context.Context, w spend.Who) (string, error)
}

// spendCaps applies a SpendLimiter to runs: owners are exempt, and a
// store that cannot be read lets the run go (and says so in the log).
type spendCaps struct {
	lim    SpendLimiter // nil: no caps
	rights interface {
		IsOwner(p chat.Platform, userID string) bool
	}
	log *slog.Logger
}

// who names the requester of a run at conv.
func spendWho(conv chat.ConvRef, user string) spend.Who {
	return spend.Who{User: string(conv.Platform) + ":" + user, Conv: conv.Key()}
}

// refusal returns the message refusing a run for user at conv, "" when
// it may go.
func (s spendCaps) refusal(ctx context.Context, conv chat.ConvRef, user string) string {
	if s.lim == nil || user == "" || s.rights.IsOwner(conv.Platform, user) {
		return ""
	}
	err := s.lim.Check(ctx, spendWho(conv, user))
	var r *spend.Refusal
	switch {
	case err == nil:
		return ""
	case errors.As(err, &r):
		s.log.Info("spend cap reached; run refused", "loc", conv.Key(), "user", user, "scope", string(r.Scope))
		return r.Error()
	default:
		s.log.Error("spend caps unreadable; letting the run go", "err", err)
		return ""
	}
}

// record counts the usage u of an assistant message for user at conv
// (owners too: their spend counts towards the conversation and global
// totals, they are only never refused).
func (s spendCaps) record(ctx context.Context, conv chat.ConvRef, user string, u llm.Usage) {
	if s.lim == nil {
		return
	}
	a := spend.Amount{USD: u.Cost.Total, Tokens: u.Input + u.Output + u.CacheRead + u.CacheWrite}
	if err := s.lim.Record(context.WithoutCancel(ctx), spendWho(conv, user), a); err != nil {
		s.log.Error("count spend", "loc", conv.Key(), "err", err)
	}
}
