package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/pibot/pibot/internal/backoff"
	"github.com/pibot/pibot/llm"
)

// run is the state of one Prompt or Continue call; it lives on the run
// goroutine only.
type run struct {
	a    *Agent
	emit func(Event)
	wd   *watchdog // nil without limits
	// lastAssistant is the last assistant message that ended in this run.
	lastAssistant *llm.Message
	// lastErr is the Go error behind lastAssistant when it failed in this
	// process (llm.Event.Err), nil otherwise; the retry decides on it.
	lastErr      error
	retryAttempt int
	// refused: a BeforeModelCall hook refused a call; the run is over and
	// is not retried.
	refused bool
}

// newRun returns the state of a run of a under the watchdog wd.
func newRun(a *Agent, emit func(Event), wd *watchdog) *run {
	if emit == nil {
		emit = func(Event) {}
	}
	return &run{a: a, emit: emit, wd: wd}
}

// send emits e and applies pi's session bookkeeping that follows a
// message_end: a successful assistant message ends a retry chain.
func (r *run) send(e Event) {
	r.wd.kick()
	r.emit(e)
	if e.Type == EventMessageEnd && e.Message != nil && e.Message.Role == llm.RoleAssistant {
		// The event's message is the event's own copy (finish), which
		// listeners only read.
		r.lastAssistant = e.Message
		if e.Message.StopReason != llm.StopError && r.retryAttempt > 0 {
			r.emit(Event{Type: EventAutoRetryEnd, Success: true, Attempt: r.retryAttempt})
			r.retryAttempt = 0
		}
	}
}

// loop is pi's runAgentLoop (prompts != nil) or agentLoopContinue.
func (r *run) loop(ctx context.Context, prompts []pending, skipInitialSteering bool) {
	// Room for the prompts and the usual answer, so that a run without
	// tools does not grow the slice.
	created := make([]llm.Message, 0, len(prompts)+1)
	r.send(Event{Type: EventAgentStart})
	r.send(Event{Type: EventTurnStart})
	for _, p := range prompts {
		created = append(created, r.inject(p))
	}
	var queued []pending
	if !skipInitialSteering {
		queued = r.drainSteer(ctx)
	}
	first := true
	for {
		more := true
		for more || len(queued) > 0 {
			if !first {
				r.send(Event{Type: EventTurnStart})
			}
			first = false
			for _, p := range queued {
				created = append(created, r.inject(p))
			}
			queued = nil
			msg, err := r.streamAssistant(ctx)
			if err != nil {
				r.fail(ctx, err)
				return
			}
			created = append(created, msg)
			if msg.StopReason == llm.StopError || msg.StopReason == llm.StopAborted {
				r.send(Event{Type: EventTurnEnd, Message: &msg, ToolResults: []llm.Message{}})
				r.send(Event{Type: EventAgentEnd, Messages: created})
				return
			}
			calls := msg.ToolCalls()
			results := []llm.Message{}
			more = len(calls) > 0
			if more {
				var terminate bool
				results, terminate = r.executeBatch(ctx, &msg, calls)
				more = !terminate
				created = append(created, results...)
			}
			r.send(Event{Type: EventTurnEnd, Message: &msg, ToolResults: results})
			queued = r.drainSteer(ctx)
		}
		if follow := r.drainFollow(ctx); len(follow) > 0 {
			queued = follow
			continue
		}
		break
	}
	r.send(Event{Type: EventAgentEnd, Messages: created})
}

// drainSteer takes the steering queue, unless the run is aborted.
//
// Here pibot differs from pi on purpose: pi takes a steering message into
// a turn whose model call is already aborted, so the message is recorded
// and never answered (a chat user who wrote while someone pressed stop
// would get no reply). An aborted run leaves its queues as they are; the
// caller takes them over (ClearTagged) for the next run.
func (r *run) drainSteer(ctx context.Context) []pending {
	if ctx.Err() != nil {
		return nil
	}
	return r.a.queue.drainSteer()
}

// drainFollow takes the follow-up queue, unless the run is aborted (see
// drainSteer).
func (r *run) drainFollow(ctx context.Context) []pending {
	if ctx.Err() != nil {
		return nil
	}
	return r.a.queue.drainFollow()
}

// inject appends a prompt or queued message to the conversation with its
// message_start/message_end (preceded by queue_update for queued texts).
func (r *run) inject(p pending) llm.Message {
	if ev, ok := r.a.queue.unshow(p); ok {
		r.send(ev)
	}
	r.a.msgs.add(p.msg)
	m := p.msg
	r.send(Event{Type: EventMessageStart, Message: &m, Tag: p.tag})
	r.send(Event{Type: EventMessageEnd, Message: &m, Tag: p.tag})
	return m
}

// fail is pi's Agent error path when the loop itself fails: a synthetic
// assistant message is recorded and only agent_end is emitted (no
// message_start/end, so a session that persists on message_end does not
// store it).
func (r *run) fail(ctx context.Context, err error) {
	m := r.wd.explain(r.a.settings.failureMessage(ctx, err))
	r.a.msgs.add(m)
	r.send(Event{Type: EventAgentEnd, Messages: []llm.Message{m}})
}

// request builds the next model request: transform, convert, repair.
func (r *run) request(ctx context.Context) (llm.Model, llm.Request, error) {
	cfg := r.a.settings.get()
	msgs := r.a.msgs.forRequest(cfg.Hooks.TransformContext != nil)
	if cfg.Model == nil {
		return nil, llm.Request{}, errors.New("agent: no model configured")
	}
	if cfg.Hooks.TransformContext != nil {
		var err error
		msgs, err = cfg.Hooks.TransformContext(ctx, msgs)
		if err != nil {
			return nil, llm.Request{}, fmt.Errorf("agent: transform context: %w", err)
		}
		msgs = llm.ConvertToLLM(msgs)
	}
	req := llm.Request{
		SystemPrompt: cfg.SystemPrompt,
		Messages:     RepairTranscript(msgs),
		Thinking:     cfg.Thinking,
		SessionID:    cfg.SessionID,
	}
	if req.Thinking == llm.ThinkingOff {
		req.Thinking = ""
	}
	for _, t := range cfg.Tools {
		req.Tools = append(req.Tools, t.Spec())
	}
	return cfg.Model, req, nil
}

// streamAssistant streams one assistant message into the conversation,
// emitting message_start, message_update and message_end.
func (r *run) streamAssistant(ctx context.Context) (llm.Message, error) {
	model, req, err := r.request(ctx)
	if err != nil {
		return llm.Message{}, err
	}
	var after func(llm.Message)
	if before := r.a.settings.hooks().BeforeModelCall; before != nil {
		if after, err = before(ctx, model.Info(), req); err != nil {
			return r.refuse(model, err), nil
		}
	}
	msg := r.callModel(ctx, model, req, after)
	return msg, nil
}

// refuse ends the run with an error message instead of a model call a
// BeforeModelCall hook refused.
func (r *run) refuse(model llm.Model, err error) llm.Message {
	r.refused = true
	r.lastErr = nil
	info := model.Info()
	m := llm.Message{
		Role: llm.RoleAssistant, Content: []llm.Content{}, StopReason: llm.StopError, ErrorMessage: err.Error(),
		API: info.API, Provider: info.Provider, Model: info.ID, Timestamp: r.a.settings.now(),
	}
	return r.finish(m, false)
}

// callModel streams one model call; after (if set) sees the final message
// before its message_end.
func (r *run) callModel(ctx context.Context, model llm.Model, req llm.Request, after func(llm.Message)) llm.Message {
	// What the stream's loop body sets, in one value: the body is a
	// closure the provider's iterator calls, so each variable it changes
	// would be a heap allocation of its own for every model call.
	var c struct {
		started bool
		// partial is the message so far. From the first update on it is
		// the live partial: its blocks are in live, an array the run
		// rewrites on every update instead of copying the message per
		// token.
		partial llm.Message
		live    []llm.Content
		// update is the assistant event of the current message_update.
		update llm.Event
		// final is the provider's last message. It is recorded once the
		// provider's stream has returned, not from inside it: message_end
		// then runs on this goroutine's stack without the provider's
		// frames under it (the gateway writes the session line there).
		final   *llm.Message
		failure error
	}
stream:
	for ev := range model.Stream(ctx, req) {
		switch ev.Type {
		case llm.EventStart:
			if ev.Partial != nil {
				c.partial = copyMessage(*ev.Partial)
			} else {
				c.partial = llm.Message{Role: llm.RoleAssistant}
			}
			r.a.msgs.setLast(c.partial, c.started)
			c.started = true
			p := c.partial
			r.send(Event{Type: EventMessageStart, Message: &p})
		case llm.EventDone, llm.EventError:
			if ev.Message == nil {
				continue
			}
			m := copyMessage(*ev.Message)
			c.final = &m
			c.failure = ev.Err
			break stream
		default:
			if !c.started {
				continue
			}
			if ev.Partial != nil {
				c.live = r.a.msgs.setLive(&c.partial, ev.Partial, c.live)
			}
			// Valid during the call only (see EventMessageUpdate): the
			// next update rewrites both.
			c.update = ev
			c.update.Partial = &c.partial
			r.send(Event{Type: EventMessageUpdate, AssistantEvent: &c.update, Message: &c.partial})
		}
	}
	if c.final == nil {
		c.final = r.unfinished(ctx, model, c.partial)
	}
	if after != nil {
		after(*c.final)
	}
	r.lastErr = c.failure
	return r.finish(*c.final, c.started)
}

// unfinished is the final message of a stream that ended without a
// terminal event, as pi records a provider failure.
func (r *run) unfinished(ctx context.Context, model llm.Model, partial llm.Message) *llm.Message {
	final := copyMessage(partial)
	final.Role = llm.RoleAssistant
	if final.Content == nil {
		final.Content = []llm.Content{}
	}
	final.StopReason = llm.StopError
	final.ErrorMessage = "agent: model stream ended without a final message"
	if ctx.Err() != nil {
		final.StopReason = llm.StopAborted
		final.ErrorMessage = "Request was aborted"
	}
	if final.Timestamp == 0 {
		final.Timestamp = r.a.settings.now()
	}
	info := model.Info()
	if final.Provider == "" {
		final.API, final.Provider, final.Model = info.API, info.Provider, info.ID
	}
	return &final
}

func (r *run) finish(final llm.Message, started bool) llm.Message {
	final = r.wd.explain(final)
	r.a.msgs.setLast(final, started)
	if !started {
		s := final
		r.send(Event{Type: EventMessageStart, Message: &s})
	}
	e := final
	r.send(Event{Type: EventMessageEnd, Message: &e})
	return final
}

func copyMessage(m llm.Message) llm.Message {
	m.Content = slices.Clone(m.Content)
	return m
}

// retry is pi's session-level auto-retry, run after each agent_end.
func (r *run) retry(ctx context.Context) {
	a := r.a
	rc := a.settings.get().Retry
	// A run its watchdog stopped, or whose call a hook refused, is over:
	// it is not retried.
	for rc.Enabled && r.wd.tripped() == nil && !r.refused {
		msg := r.lastAssistant
		// The error this process got decides before pi's pattern reads
		// the message's text (llm.ShouldRetry).
		if msg == nil || !llm.ShouldRetry(*msg, r.lastErr, a.settings.contextWindow()) {
			return
		}
		r.retryAttempt++
		limit := rc.MaxRetries
		switch {
		case llm.IsSilence(*msg):
			limit = 0
		case llm.IsStall(*msg):
			limit = min(limit, StallRetries)
		}
		if r.retryAttempt > limit {
			r.send(Event{Type: EventAutoRetryEnd, Success: false, Attempt: r.retryAttempt - 1, FinalError: msg.ErrorMessage})
			r.retryAttempt = 0
			return
		}
		delay := backoff.Exp(rc.BaseDelay, r.retryAttempt, 0)
		r.send(Event{Type: EventAutoRetryStart, Attempt: r.retryAttempt, MaxAttempts: limit,
			DelayMs: delay.Milliseconds(), ErrorMessage: msg.ErrorMessage})
		a.msgs.removeLastAssistant()
		if err := rc.Sleep(ctx, delay); err != nil {
			r.send(Event{Type: EventAutoRetryEnd, Success: false, Attempt: r.retryAttempt, FinalError: "Retry cancelled"})
			r.retryAttempt = 0
			return
		}
		r.lastAssistant, r.lastErr = nil, nil
		r.loop(ctx, nil, false)
	}
}
