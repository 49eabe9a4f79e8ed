package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/llm"
)

// Compaction reasons, as pi names them in compaction_start/compaction_end.
const (
	ReasonThreshold = "threshold"
	ReasonOverflow  = "overflow"
	ReasonManual    = "manual"
)

// overflowFailedText is pi's error when overflow recovery already failed.
const overflowFailedText = "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."

// CompactFunc compacts the session the agent runs on: it prepares and
// summarizes the branch (package compaction), appends the compaction entry
// to the session and returns the result and the rebuilt context messages.
// customInstructions is non-empty only for manual compaction.
type CompactFunc func(ctx context.Context, reason, customInstructions string) (*compaction.Result, []llm.Message, error)

// Maintenance decides, like pi's AgentSession, when a session must be
// compacted: after each run (context overflow → compact and continue once;
// threshold → compact) and before each prompt, and runs manual compaction.
// It emits compaction_start/compaction_end around every compaction.
//
// A Maintenance belongs to one session and must be used from one goroutine
// (the one that runs the agent), between runs.
type Maintenance struct {
	// Settings are the compaction settings (threshold and enablement).
	Settings compaction.Settings
	// Compact performs a compaction.
	Compact CompactFunc
	// Now returns the current time; nil means time.Now.
	Now func() time.Time

	overflowTried  bool
	lastCompaction int64
}

// NewMaintenance returns a Maintenance with settings s and compact.
func NewMaintenance(s compaction.Settings, compact CompactFunc) *Maintenance {
	return &Maintenance{Settings: s, Compact: compact}
}

// SetLastCompaction records the time of the latest compaction on the
// branch (e.g. when a session is loaded), so older messages are not checked.
func (m *Maintenance) SetLastCompaction(t time.Time) { m.lastCompaction = t.UnixMilli() }

// Observe must see every event of the agent's runs: a user message_start or
// a successful assistant message_end re-arms overflow recovery.
func (m *Maintenance) Observe(e Event) {
	switch {
	case e.Type == EventMessageStart && e.Message != nil && e.Message.Role == llm.RoleUser:
		m.overflowTried = false
	case e.Type == EventMessageEnd && e.Message != nil && e.Message.Role == llm.RoleAssistant && e.Message.StopReason != llm.StopError:
		m.overflowTried = false
	}
}

// AfterRun is pi's check after agent_end: it looks at the last assistant
// message and compacts on overflow (then continues the run once) or when
// the context crosses the threshold (then continues only if messages are
// queued). emit receives the compaction events and the continued run's
// events. The returned error reports a failed compaction (also reported in
// compaction_end).
func (m *Maintenance) AfterRun(ctx context.Context, a *Agent, emit func(Event)) error {
	return m.check(ctx, a, emit, true)
}

// BeforePrompt is pi's check before a new prompt: the same rules (aborted
// messages included), without continuing a run afterwards.
func (m *Maintenance) BeforePrompt(ctx context.Context, a *Agent, emit func(Event)) error {
	return m.check(ctx, a, emit, false)
}

// Manual compacts now with optional custom instructions (pi's /compact).
// The agent must be idle.
func (m *Maintenance) Manual(ctx context.Context, a *Agent, emit func(Event), customInstructions string) (*compaction.Result, error) {
	return m.run(ctx, a, emit, ReasonManual, customInstructions, false)
}

func (m *Maintenance) check(ctx context.Context, a *Agent, emit func(Event), afterRun bool) error {
	if emit == nil {
		emit = func(Event) {}
	}
	msgs := a.Messages()
	var msg *llm.Message
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleAssistant {
			msg = &msgs[i]
			break
		}
	}
	if msg == nil || (afterRun && msg.StopReason == llm.StopAborted) || msg.Timestamp <= m.lastCompaction {
		return nil
	}
	model := a.Model()
	if model == nil {
		return nil
	}
	info := model.Info()
	if msg.Provider == info.Provider && msg.Model == info.ID && llm.IsContextOverflow(*msg, info.ContextWindow) {
		if m.overflowTried {
			emit(Event{Type: EventCompactionEnd, Reason: ReasonOverflow, ErrorMessage: overflowFailedText})
			return nil
		}
		if !m.Settings.Enabled {
			return nil
		}
		m.overflowTried = true
		last, removed := a.msgs.removeLastAssistant()
		_, err := m.run(ctx, a, emit, ReasonOverflow, "", afterRun)
		if nothingToCompact(err) {
			// Nothing before the overflowing request to summarize (pi's
			// preparation is empty then): the run ends as it did, with
			// the provider's error or, for a silent overflow, the answer.
			if removed {
				a.msgs.add(last)
			}
			return nil
		}
		return err
	}
	var tokens int64
	if msg.StopReason == llm.StopError {
		if !hasUsableUsage(msgs, m.lastCompaction) {
			return nil
		}
		tokens = compaction.EstimateContextTokens(msgs)
	} else {
		tokens = msg.Usage.Tokens()
	}
	if !compaction.ShouldCompact(tokens, info.ContextWindow, m.Settings) {
		return nil
	}
	_, err := m.run(ctx, a, emit, ReasonThreshold, "", false)
	if nothingToCompact(err) {
		return nil
	}
	if err == nil && afterRun {
		if s, f := a.Queued(); len(s)+len(f) > 0 {
			if cerr := a.Continue(ctx, emit); cerr != nil {
				return fmt.Errorf("agent: continue after compaction: %w", cerr)
			}
		}
	}
	return err
}

// nothingToCompact reports whether a compaction failed only because the
// branch has nothing to summarize (all of it is kept, or it ends with a
// compaction). An automatic compaction then does nothing, without an
// error, as in pi.
func nothingToCompact(err error) bool {
	return errors.Is(err, compaction.ErrNothingToCompact) || errors.Is(err, compaction.ErrAlreadyCompacted)
}

func hasUsableUsage(msgs []llm.Message, after int64) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		x := msgs[i]
		if x.Role == llm.RoleAssistant && x.StopReason != llm.StopError && x.StopReason != llm.StopAborted && x.Usage.Tokens() > 0 {
			return x.Timestamp > after
		}
	}
	return false
}

// run performs one compaction with its events and, when willRetry,
// continues the agent afterwards.
func (m *Maintenance) run(ctx context.Context, a *Agent, emit func(Event), reason, instructions string, willRetry bool) (*compaction.Result, error) {
	if emit == nil {
		emit = func(Event) {}
	}
	if m.Compact == nil {
		return nil, fmt.Errorf("agent: compaction: no compact function")
	}
	emit(Event{Type: EventCompactionStart, Reason: reason})
	res, msgs, err := m.Compact(ctx, reason, instructions)
	if err != nil {
		end := Event{Type: EventCompactionEnd, Reason: reason, Aborted: ctx.Err() != nil}
		if !end.Aborted && (reason == ReasonManual || !nothingToCompact(err)) {
			switch reason {
			case ReasonOverflow:
				end.ErrorMessage = "Context overflow recovery failed: " + err.Error()
			case ReasonThreshold:
				end.ErrorMessage = "Auto-compaction failed: " + err.Error()
			default:
				end.ErrorMessage = err.Error()
			}
		}
		emit(end)
		return nil, fmt.Errorf("agent: compaction: %w", err)
	}
	if reason == ReasonOverflow {
		if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleAssistant && msgs[n-1].StopReason == llm.StopError {
			msgs = msgs[:n-1]
		}
	}
	a.SetMessages(msgs)
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	m.lastCompaction = now().UnixMilli()
	emit(Event{Type: EventCompactionEnd, Reason: reason, Compaction: res, WillRetry: willRetry})
	if willRetry {
		// After a silent overflow the answer is the last message: pi's
		// continue then has nothing to do and its failure is ignored.
		if err := a.Continue(ctx, emit); err != nil && !errors.Is(err, ErrNothingToContinue) {
			return res, fmt.Errorf("agent: continue after compaction: %w", err)
		}
	}
	return res, nil
}
