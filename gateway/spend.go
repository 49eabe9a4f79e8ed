package gateway

import (
	"context"
	"errors"
	"log/slog"

	"github.com/pibot/pibot/agent/compaction"
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
	// Reserve holds a, the estimate of w's next model call, atomically
	// against the caps: a *spend.Refusal when the call would pass one.
	Reserve(ctx context.Context, w spend.Who, a spend.Amount) (spend.Hold, error)
	// Settle counts a call's actual usage in place of its hold.
	Settle(ctx context.Context, h spend.Hold, actual spend.Amount) error
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

// refusal returns the message refusing a run for user at conv with agent
// ("": none), "" when it may go.
func (s spendCaps) refusal(ctx context.Context, conv chat.ConvRef, user, agent string) string {
	if s.lim == nil || user == "" || s.rights.IsOwner(conv.Platform, user) {
		return ""
	}
	who := spendWho(conv, user)
	who.Agent = agent
	err := s.lim.Check(ctx, who)
	var r *spend.Refusal
	switch {
	case err == nil:
		return ""
	case errors.As(err, &r):
		s.log.Info("spend cap reached; run refused", "loc", conv.Key(), "user", user, "scope", string(r.Scope), "agent", r.Agent)
		return r.Error()
	default:
		s.log.Error("spend caps unreadable; letting the run go", "err", err)
		return ""
	}
}

// beforeCall returns the agent's BeforeModelCall hook for a run of user
// at conv (nil without caps). Before each model call of a non-owner's run
// it reserves the call's estimate (estimateCall) against the caps, which
// refuses the call when it would pass one, and after the call settles the
// hold with the usage the provider reported. Owners' calls are counted
// after the call (their spend counts towards the conversation and global
// totals; they are only never refused). A store that cannot be read lets
// the call go and counts it afterwards.
//
// So a cap is passed only by what calls in flight use beyond their
// estimates: at most one call per run of the capped scope running at that
// moment (the calls of one run are sequential).
func (s spendCaps) beforeCall(conv chat.ConvRef, user, agent string) func(context.Context, llm.ModelInfo, llm.Request) (func(llm.Message), error) {
	if s.lim == nil {
		return nil
	}
	who := spendWho(conv, user)
	who.Agent = agent
	return func(ctx context.Context, info llm.ModelInfo, req llm.Request) (func(llm.Message), error) {
		ctx = context.WithoutCancel(ctx)
		count := func(m llm.Message) {
			if err := s.lim.Record(ctx, who, amountOf(m.Usage)); err != nil {
				s.log.Error("count spend", "loc", conv.Key(), "err", err)
			}
		}
		if user == "" || s.rights.IsOwner(conv.Platform, user) {
			return count, nil
		}
		est := estimateCall(info, req)
		h, err := s.lim.Reserve(ctx, who, est)
		var r *spend.Refusal
		switch {
		case errors.As(err, &r):
			s.log.Info("spend cap reached; model call refused", "loc", conv.Key(), "user", user, "scope", string(r.Scope), "agent", r.Agent,
				"estimate_tokens", est.Tokens, "estimate_usd", est.USD)
			return nil, r
		case err != nil:
			s.log.Error("spend caps unreadable; letting the model call go", "err", err)
			return count, nil
		}
		return func(m llm.Message) {
			if err := s.lim.Settle(ctx, h, amountOf(m.Usage)); err != nil {
				s.log.Error("count spend", "loc", conv.Key(), "err", err)
			}
		}, nil
	}
}

// amountOf is what usage u counts against the caps.
func amountOf(u llm.Usage) spend.Amount {
	return spend.Amount{USD: u.Cost.Total, Tokens: u.Input + u.Output + u.CacheRead + u.CacheWrite}
}

// outputAllowance is the answer, in tokens, a model call's estimate
// assumes: most chat answers and tool-call turns are shorter; what a
// longer answer writes beyond it is what a cap can be passed by.
const outputAllowance = 1024

// estimateCall estimates the usage of a model call before it is made:
// the context it sends, as compaction estimates it (the last answer's
// reported usage plus characters/4 of the messages after it; without an
// answer with usage, characters/4 of every message, the system prompt and
// the tool specs), plus outputAllowance tokens of answer (at most the
// model's max_tokens), priced with the model's cost table at the full
// input price (no cache discount is assumed).
func estimateCall(info llm.ModelInfo, req llm.Request) spend.Amount {
	in := compaction.EstimateContextTokens(req.Messages)
	if !answered(req.Messages) {
		chars := len(req.SystemPrompt)
		for _, t := range req.Tools {
			chars += len(t.Name) + len(t.Description) + len(t.Parameters)
		}
		in += int64(chars+3) / 4
	}
	out := int64(outputAllowance)
	if info.MaxTokens > 0 && info.MaxTokens < out {
		out = info.MaxTokens
	}
	return spend.Amount{USD: info.CostOf(llm.Usage{Input: in, Output: out}).Total, Tokens: in + out}
}

// answered reports whether msgs hold an answer whose usage counts for the
// context (as compaction.EstimateContextTokens looks for one): its usage
// then includes the system prompt and the tools.
func answered(msgs []llm.Message) bool {
	for i := range msgs {
		m := &msgs[i]
		if m.Role == llm.RoleAssistant && m.StopReason != llm.StopError && m.StopReason != llm.StopAborted && m.Usage.Tokens() > 0 {
			return true
		}
	}
	return false
}
