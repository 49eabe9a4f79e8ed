// Package faux is a scripted model for tests and demos. A Model plays Turns
// in order, one per Stream call, through the same event contract as the
// real providers: text, thinking and tool calls streamed in small pieces
// with optional delays, usage and cost, errors, and cancellation.
//
// When the script is exhausted the last Turn is repeated; a Model created
// without any Turn answers every call with Echo, which mentions the last
// user message (handy for `pibot serve` demos with provider "faux").
package faux

import (
	"context"
	"encoding/json"
	"iter"
	"strings"
	"sync"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/assemble"
)

// API is the wire protocol name of faux models.
const API = "faux"

// ToolCall is a scripted tool call. Args is a JSON object.
type ToolCall struct {
	ID   string
	Name string
	Args string
}

// Turn is one scripted response.
type Turn struct {
	// Thinking, if set, is streamed first as a thinking block.
	Thinking string
	// Text, if set, is streamed as a text block.
	Text string
	// Calls are streamed as tool-call blocks after the text.
	Calls []ToolCall
	// Err, if set, ends the response with stopReason error and this
	// errorMessage after the content above has been streamed.
	Err string
	// StopReason overrides the reason of a successful turn (e.g.
	// llm.StopLength); by default it is toolUse when Calls are present and
	// stop otherwise.
	StopReason llm.StopReason
	// Delay is waited before every streamed piece (token).
	Delay time.Duration
	// Usage, if set, is reported instead of the chars/4 estimate.
	Usage *llm.Usage
	// Reply, if set, computes the turn from the request (its own Reply is
	// ignored). Echo uses it.
	Reply func(llm.Request) Turn
}

// Text returns a turn that answers s.
func Text(s string) Turn { return Turn{Text: s} }

// Thinking returns a turn that thinks thought, then answers text.
func Thinking(thought, text string) Turn { return Turn{Thinking: thought, Text: text} }

// Call returns a tool call with JSON arguments args.
func Call(id, name, args string) ToolCall { return ToolCall{ID: id, Name: name, Args: args} }

// ToolCalls returns a turn that calls tools (stopReason toolUse).
func ToolCalls(calls ...ToolCall) Turn { return Turn{Calls: calls} }

// Error returns a turn that fails with errorMessage msg, e.g.
// Error("529 overloaded") for a retryable failure.
func Error(msg string) Turn { return Turn{Err: msg} }

// Echo returns a turn that answers with a canned text quoting the user
// messages of the request since the model last answered (the last user
// message when the request ends with a tool result).
func Echo() Turn { return Turn{Reply: echo} }

// WithDelay returns t with a per-token delay d.
func (t Turn) WithDelay(d time.Duration) Turn { t.Delay = d; return t }

// WithUsage returns t reporting usage u.
func (t Turn) WithUsage(u llm.Usage) Turn { t.Usage = &u; return t }

func echo(req llm.Request) Turn {
	// The user messages since the model last spoke: one, or several
	// that arrived together (each is quoted, so every one is answered);
	// after a tool result, the last user message.
	first := len(req.Messages)
	for first > 0 && req.Messages[first-1].Role == llm.RoleUser {
		first--
	}
	if first == len(req.Messages) {
		for first > 0 && req.Messages[first-1].Role != llm.RoleUser {
			first--
		}
		if first > 0 {
			first--
		}
	}
	var said strings.Builder
	for _, m := range req.Messages[first:] {
		if t := m.Text(); t != "" && m.Role == llm.RoleUser {
			said.WriteString("You said: " + t + "\n\n")
		}
	}
	if said.Len() == 0 {
		return Text("Hello from the faux model. Say something and I will echo it.")
	}
	return Text(said.String() + "This is the faux model: it streams a canned answer so you can try pibot without an API key.")
}

// Model is a scripted llm.Model. It is safe for concurrent use.
type Model struct {
	info llm.ModelInfo

	mu       sync.Mutex
	script   []Turn
	next     int
	calls    int
	requests []llm.Request // the most recent keptRequests
	unlogged bool          // WithoutLog: requests is not kept
}

// keptRequests bounds the request log, so that a faux model serving a
// long-running gateway (a scripted demo) does not grow without end.
const keptRequests = 1000

// New returns a model that plays script. info.API defaults to "faux".
func New(info llm.ModelInfo, script ...Turn) *Model {
	if info.API == "" {
		info.API = API
	}
	if info.Provider == "" {
		info.Provider = "faux"
	}
	if info.ID == "" {
		info.ID = "faux"
	}
	return &Model{info: info, script: append([]Turn(nil), script...)}
}

// Info returns the model description.
func (m *Model) Info() llm.ModelInfo { return m.info }

// Push appends turns to the script. Turns not yet played are played first.
func (m *Model) Push(turns ...Turn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next > len(m.script) {
		m.next = len(m.script)
	}
	m.script = append(m.script, turns...)
}

// WithoutLog makes m keep no request log (Requests returns none) and
// returns m: for load tests, where copying every request's history into
// the log was most of what the fake itself allocated.
func (m *Model) WithoutLog() *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unlogged, m.requests = true, nil
	return m
}

// Requests returns a copy of the requests received, in order: all of
// them, or the most recent 1,000.
func (m *Model) Requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.requests...)
}

// Calls returns how many times Stream was called.
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

func (m *Model) take(req llm.Request) Turn {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if !m.unlogged {
		req.Messages = append([]llm.Message(nil), req.Messages...)
		req.Tools = append([]llm.ToolSpec(nil), req.Tools...)
		if len(m.requests) == keptRequests {
			m.requests = m.requests[1:]
		}
		m.requests = append(m.requests, req)
	}
	var t Turn
	switch {
	case len(m.script) == 0:
		t = Echo()
	case m.next < len(m.script):
		t = m.script[m.next]
		m.next++
	default:
		t = m.script[len(m.script)-1]
		m.next = len(m.script) + 1
	}
	if t.Reply != nil {
		delay := t.Delay
		t = t.Reply(req)
		t.Reply = nil
		if t.Delay == 0 {
			t.Delay = delay
		}
	}
	return t
}

// Stream plays the next turn.
func (m *Model) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		t := m.take(req)
		b := assemble.New(m.info, yield, nil)
		p := player{ctx: ctx, b: b, delay: t.Delay}
		defer p.stop()
		if !p.play(t) {
			if ctx.Err() != nil && !b.Stopped() {
				b.Abort()
			}
			return
		}
		b.SetUsage(usage(t, req, b.Message()))
		if t.Err != "" {
			b.Fail(llm.StopError, t.Err)
			return
		}
		reason := t.StopReason
		if reason == "" {
			reason = llm.StopStop
			if len(t.Calls) > 0 {
				reason = llm.StopToolUse
			}
		}
		b.Done(reason)
	}
}

type player struct {
	ctx   context.Context
	b     *assemble.Builder
	delay time.Duration
	// tm paces the tokens: one timer per stream, not one per token.
	tm *time.Timer
}

// wait sleeps one token delay; false when ctx ends first.
func (p *player) wait() bool {
	if p.ctx.Err() != nil {
		return false
	}
	if p.delay <= 0 {
		return true
	}
	if p.tm == nil {
		p.tm = time.NewTimer(p.delay)
	} else {
		p.tm.Reset(p.delay) // (since Go 1.23 no stale tick survives a Reset)
	}
	select {
	case <-p.tm.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// stop releases the pacing timer.
func (p *player) stop() {
	if p.tm != nil {
		p.tm.Stop()
	}
}

func (p *player) play(t Turn) bool {
	bs := p.b.Blocks()
	if !p.wait() || !p.b.Start() {
		return false
	}
	if t.Thinking != "" && !p.block(bs.ThinkingStart, t.Thinking) {
		return false
	}
	if t.Text != "" && !p.block(bs.TextStart, t.Text) {
		return false
	}
	for _, c := range t.Calls {
		if !p.wait() {
			return false
		}
		i, ok := bs.ToolCallStart(c.ID, c.Name)
		if !ok {
			return false
		}
		for _, piece := range splitArgs(c.Args) {
			if !p.wait() || !bs.Delta(i, piece) {
				return false
			}
		}
		if !bs.End(i) {
			return false
		}
	}
	return true
}

func (p *player) block(start func() (int, bool), s string) bool {
	bs := p.b.Blocks()
	i, ok := start()
	if !ok {
		return false
	}
	for _, tok := range Tokens(s) {
		if !p.wait() || !bs.Delta(i, tok) {
			return false
		}
	}
	return bs.End(i)
}

// Tokens splits s into the pieces faux streams: words with their trailing
// whitespace. Concatenated they give s back.
func Tokens(s string) []string {
	var out []string
	start := 0
	for i := 1; i < len(s); i++ {
		if isSpace(s[i-1]) && !isSpace(s[i]) {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' }

// splitArgs cuts a JSON text into up to four fragments.
func splitArgs(s string) []string {
	if s == "" {
		return nil
	}
	n := (len(s) + 3) / 4
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

func usage(t Turn, req llm.Request, msg *llm.Message) llm.Usage {
	if t.Usage != nil {
		return *t.Usage
	}
	in := len(req.SystemPrompt)
	for _, m := range req.Messages {
		b, err := json.Marshal(m)
		if err == nil {
			in += len(b)
		}
	}
	out := 0
	for _, c := range msg.Content {
		out += len(c.Text) + len(c.Thinking) + len(c.Arguments) + len(c.Name)
	}
	return llm.Usage{Input: int64((in + 3) / 4), Output: int64((out + 3) / 4)}
}

var _ llm.Model = (*Model)(nil)
