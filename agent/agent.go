package agent

import (
	"context"
	"errors"
	"time"

	"github.com/pibot/pibot/internal/backoff"
	"github.com/pibot/pibot/llm"
)

// ErrNothingToContinue is matched (errors.Is) by the error of Continue on
// an empty conversation, or one that ends with an assistant message while
// nothing is queued: there is no model call to make.
var ErrNothingToContinue = errors.New("agent: nothing to continue")

// nothingToContinue is the text of a Continue that has no call to make.
type nothingToContinue string

func (e nothingToContinue) Error() string        { return string(e) }
func (e nothingToContinue) Is(target error) bool { return target == ErrNothingToContinue }

// ErrRunning is returned by Prompt and Continue while a run is active.
var ErrRunning = errors.New("agent: a run is already active")

// QueueMode says how many queued messages are drained at a boundary.
type QueueMode string

// Queue modes, as pi names them.
const (
	// QueueOneAtATime drains only the oldest queued message (the default).
	QueueOneAtATime QueueMode = "one-at-a-time"
	// QueueAll drains every queued message at once.
	QueueAll QueueMode = "all"
)

// RetryConfig configures pi's automatic retry of retryable provider errors.
type RetryConfig struct {
	Enabled bool
	// MaxRetries is the number of retries; 0 means 3. A call the provider
	// stopped answering is retried less (StallRetries).
	MaxRetries int
	// BaseDelay is the first delay, doubled on each attempt; 0 means 2s.
	BaseDelay time.Duration
	// Sleep waits d or until ctx is done; nil means a real timer. Tests
	// inject a fake.
	Sleep func(ctx context.Context, d time.Duration) error
}

// StallRetries is how often a call the provider stopped answering in the
// middle (an idle timeout, llm.IsStall) is retried, whatever MaxRetries
// says: each attempt may cost the whole timeout again, and a provider that
// stalled once mostly stalls again. A call that got nothing at all within
// the first-byte timeout (llm.IsSilence) is not retried: that wait is the
// longest already. So a hung provider holds a conversation for about two
// idle timeouts, or one first-byte timeout, not for four of them.
const StallRetries = 1

// DefaultRetry returns pi's defaults: enabled, 3 retries, 2 s base delay.
func DefaultRetry() RetryConfig {
	return RetryConfig{Enabled: true, MaxRetries: 3, BaseDelay: 2 * time.Second}
}

// Config configures an Agent.
type Config struct {
	Model        llm.Model
	Thinking     llm.ThinkingLevel
	SystemPrompt string
	Tools        []Tool
	// Sequential runs tool calls one at a time instead of in parallel.
	Sequential bool
	Hooks      Hooks
	// SteeringMode and FollowUpMode default to QueueOneAtATime.
	SteeringMode QueueMode
	FollowUpMode QueueMode
	Retry        RetryConfig
	// SessionID is passed to the model as a prompt-cache key.
	SessionID string
	// Now returns the current time for message timestamps; nil means
	// time.Now.
	Now func() time.Time
	// Watchdog bounds every run (agent.max_run, agent.max_idle).
	Watchdog Watchdog
}

// Agent is a stateful agent, like pi's Agent class: it holds the messages
// of a conversation and the steering and follow-up queues, and runs the
// loop on Prompt and Continue. It composes one part per job: its
// configuration (settings), the conversation, the queues, and whether a
// run is active (lifecycle); a run's state and loop live in run.
//
// Concurrency: Prompt and Continue run the loop on the calling goroutine
// and call emit synchronously from it, one event at a time, in pi's order.
// Only one run is active at a time. While a run is active, SteerTagged,
// FollowUpTagged, ClearTagged, Queued, QueueUpdate, Abort, Messages,
// Running, Model and SetThinking are safe to call from other goroutines; SetMessages must only
// be called while no run is active. Tool calls of a parallel batch execute
// on goroutines owned by the run, which waits for all of them before it
// continues.
type Agent struct {
	settings settings
	msgs     conversation
	queue    queues
	life     lifecycle
}

// New returns an agent with cfg and a copy of the given conversation
// history.
func New(cfg Config, history []llm.Message) *Agent {
	// Room for a run's prompt, answer and a tool turn, so that they
	// do not copy the history again.
	msgs := make([]llm.Message, len(history), len(history)+Headroom)
	copy(msgs, history)
	return Adopt(cfg, msgs)
}

// Adopt returns an agent with cfg whose conversation is history itself,
// not a copy. It saves New's copy of a history built for the agent;
// spare capacity (see [Headroom]) lets a run append without copying it.
// The agent only appends: it never writes over history's elements, so
// the caller may keep reading them, but it must not change them, and
// what lies beyond len(history) in the backing array is the agent's
// until its last run is over.
func Adopt(cfg Config, history []llm.Message) *Agent {
	if cfg.SteeringMode == "" {
		cfg.SteeringMode = QueueOneAtATime
	}
	if cfg.FollowUpMode == "" {
		cfg.FollowUpMode = QueueOneAtATime
	}
	if cfg.Retry.MaxRetries <= 0 {
		cfg.Retry.MaxRetries = 3
	}
	if cfg.Retry.BaseDelay <= 0 {
		cfg.Retry.BaseDelay = 2 * time.Second
	}
	if cfg.Retry.Sleep == nil {
		cfg.Retry.Sleep = backoff.Sleep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Agent{settings: settings{cfg: cfg}, msgs: conversation{messages: history}}
	a.queue.steerMode, a.queue.followMode = cfg.SteeringMode, cfg.FollowUpMode
	return a
}

// Headroom is the spare capacity after a history that lets a run add its
// prompt, answer and a tool turn without copying the history.
const Headroom = 4

// Prompt appends prompts to the conversation and runs the loop until
// agent_end, including automatic retries. It returns ErrRunning if a run is
// already active and nil otherwise: failures end up in events and messages
// as they do in pi.
func (a *Agent) Prompt(ctx context.Context, emit func(Event), prompts ...llm.Message) error {
	items := make([]Tagged, len(prompts))
	for i, p := range prompts {
		items[i] = Tagged{Message: p}
	}
	return a.PromptTagged(ctx, emit, items...)
}

// PromptTagged is Prompt for tagged messages: each prompt's message_start
// and message_end carry its tag.
func (a *Agent) PromptTagged(ctx context.Context, emit func(Event), prompts ...Tagged) error {
	runCtx, wd, err := a.life.begin(ctx, a.settings.get().Watchdog)
	if err != nil {
		return err
	}
	defer a.life.end()
	r := newRun(a, emit, wd)
	items := make([]pending, len(prompts))
	for i, p := range prompts {
		items[i] = pending{msg: p.Message, tag: p.Tag}
	}
	r.loop(runCtx, items, false)
	r.retry(runCtx)
	return nil
}

// Continue resumes the conversation without a new prompt, like pi's
// Agent.continue: if the last message is an assistant message, queued
// steering (else queued follow-up) messages are run as prompts; otherwise
// the model is called on the current messages. It returns ErrRunning if a
// run is active, or an error if there is nothing to continue.
func (a *Agent) Continue(ctx context.Context, emit func(Event)) error {
	runCtx, wd, err := a.life.begin(ctx, a.settings.get().Watchdog)
	if err != nil {
		return err
	}
	defer a.life.end()
	n, last := a.msgs.last()
	r := newRun(a, emit, wd)
	switch {
	case n == 0:
		return nothingToContinue("agent: no messages to continue from")
	case last == llm.RoleAssistant:
		if steer := a.queue.drainSteer(); len(steer) > 0 {
			r.loop(runCtx, steer, true)
		} else if follow := a.queue.drainFollow(); len(follow) > 0 {
			r.loop(runCtx, follow, false)
		} else {
			return nothingToContinue("agent: cannot continue from message role: assistant")
		}
	default:
		r.loop(runCtx, nil, false)
	}
	r.retry(runCtx)
	return nil
}

// Abort cancels the active run: the provider stream and running tools see
// their context cancelled, and a pending retry sleep ends. It does nothing
// when no run is active.
func (a *Agent) Abort() { a.life.abort() }

// Running reports whether a run is active.
func (a *Agent) Running() bool { return a.life.active() }

// Messages returns a copy of the conversation, including a partial
// assistant message while one streams.
func (a *Agent) Messages() []llm.Message { return a.msgs.snapshot() }

// SetMessages replaces the conversation (e.g. after compaction). It must
// not be called while a run is active.
func (a *Agent) SetMessages(msgs []llm.Message) { a.msgs.set(msgs) }

// Model returns the current model.
func (a *Agent) Model() llm.Model { return a.settings.model() }

// SetThinking changes the thinking level from the next model call on.
func (a *Agent) SetThinking(l llm.ThinkingLevel) { a.settings.setThinking(l) }
