package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/pibot/pibot/llm"
)

// call is one tool call of a batch as it moves through preparation,
// execution and finalization.
type call struct {
	block llm.Content
	tool  Tool
	tc    ToolCall
	// res is set once the call has an outcome.
	res ToolResult
}

// toolMsg carries a partial or final outcome from a tool goroutine to the
// run goroutine, which emits all events.
type toolMsg struct {
	idx    int
	update *llm.ToolOutput
	out    llm.ToolOutput
	err    error
	final  bool
}

// toolBatch runs the tool calls of one assistant message for a run: it
// prepares them, executes them and records their results.
type toolBatch struct {
	run   *run
	hooks Hooks
}

// executeBatch runs the tool calls of one assistant message (pi §3.5) and
// returns the toolResult messages in the assistant's order, and whether
// every result asked to terminate.
func (r *run) executeBatch(ctx context.Context, assistant *llm.Message, blocks []llm.Content) ([]llm.Message, bool) {
	cfg := r.a.settings.get()
	tools, sequential, hooks := cfg.Tools, cfg.Sequential, cfg.Hooks

	calls := make([]*call, len(blocks))
	for i, b := range blocks {
		calls[i] = &call{block: b, tool: findTool(tools, b.Name)}
		if st, ok := calls[i].tool.(SequentialTool); ok && st.Sequential() {
			sequential = true
		}
	}
	tb := &toolBatch{run: r, hooks: hooks}
	results := make([]llm.Message, 0, len(calls))
	if sequential {
		for i, c := range calls {
			if !tb.prepare(ctx, assistant, c) {
				tb.runTools(ctx, calls, []int{i})
			}
			results = append(results, tb.resultMessage(c))
		}
		return results, allTerminate(calls)
	}
	var runnable []int
	for i, c := range calls {
		if !tb.prepare(ctx, assistant, c) {
			runnable = append(runnable, i)
		}
	}
	tb.runTools(ctx, calls, runnable)
	for _, c := range calls {
		results = append(results, tb.resultMessage(c))
	}
	return results, allTerminate(calls)
}

func findTool(tools []Tool, name string) Tool {
	for _, t := range tools {
		if t.Spec().Name == name {
			return t
		}
	}
	return nil
}

func allTerminate(calls []*call) bool {
	if len(calls) == 0 {
		return false
	}
	for _, c := range calls {
		if !c.res.Terminate {
			return false
		}
	}
	return true
}

// prepare emits tool_execution_start, then looks the tool up, validates
// the arguments and asks BeforeToolCall. It reports true when the call
// already has its (error) outcome, for which tool_execution_end is emitted.
func (tb *toolBatch) prepare(ctx context.Context, assistant *llm.Message, c *call) bool {
	b := c.block
	tb.run.send(Event{Type: EventToolExecutionStart, ToolCallID: b.ID, ToolName: b.Name, Args: rawOrEmpty(b.Arguments)})
	immediate := func(text string) bool {
		c.res = errorResult(text)
		tb.sendEnd(c)
		return true
	}
	if c.tool == nil {
		return immediate(fmt.Sprintf("Tool %s not found", b.Name))
	}
	args, err := validateArgs(b.Name, c.tool.Spec().Parameters, b.Arguments)
	if err != nil {
		return immediate(err.Error())
	}
	c.tc = ToolCall{ID: b.ID, Name: b.Name, Args: args, Assistant: assistant}
	if tb.hooks.BeforeToolCall != nil {
		d, err := tb.hooks.BeforeToolCall(ctx, c.tc)
		if err != nil {
			return immediate(err.Error())
		}
		if d.Block {
			if d.Reason == "" {
				d.Reason = "Tool execution was blocked"
			}
			return immediate(d.Reason)
		}
		if d.Args != nil {
			c.tc.Args = d.Args
		}
	}
	return false
}

func errorResult(text string) ToolResult {
	return ToolResult{Content: []llm.Content{llm.TextBlock(text)}, Details: map[string]any{}, IsError: true}
}

// runTools executes calls[idx...] concurrently and finalizes each in
// completion order (AfterToolCall, then tool_execution_end), relaying
// partial results as tool_execution_update.
func (tb *toolBatch) runTools(ctx context.Context, calls []*call, idx []int) {
	if len(idx) == 0 {
		return
	}
	ch := make(chan toolMsg)
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			execTool(ctx, calls[i], i, ch)
		}()
	}
	for remaining := len(idx); remaining > 0; {
		m := <-ch
		c := calls[m.idx]
		if !m.final {
			tb.run.send(Event{Type: EventToolExecutionUpdate, ToolCallID: c.block.ID, ToolName: c.block.Name,
				Args: rawOrEmpty(c.block.Arguments), Result: m.update})
			continue
		}
		remaining--
		if m.err != nil {
			c.res = errorResult(m.err.Error())
		} else {
			c.res = ToolResult{Content: m.out.Content, Details: m.out.Details, Terminate: m.out.Terminate}
		}
		if tb.hooks.AfterToolCall != nil {
			if err := tb.hooks.AfterToolCall(ctx, c.tc, &c.res); err != nil {
				c.res = errorResult(err.Error())
			}
		}
		tb.sendEnd(c)
	}
	wg.Wait()
}

// execTool runs one tool on its own goroutine. Updates reported after the
// tool returned are dropped; a panic becomes an error result.
func execTool(ctx context.Context, c *call, idx int, ch chan<- toolMsg) {
	var mu sync.Mutex
	finished := false
	update := func(o llm.ToolOutput) {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return
		}
		cp := o
		ch <- toolMsg{idx: idx, update: &cp}
	}
	out, err := safeExecute(ctx, c, update)
	mu.Lock()
	finished = true
	mu.Unlock()
	ch <- toolMsg{idx: idx, out: out, err: err, final: true}
}

func safeExecute(ctx context.Context, c *call, update func(llm.ToolOutput)) (out llm.ToolOutput, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %s panicked: %v", c.block.Name, p)
		}
	}()
	return c.tool.Execute(ctx, c.block.ID, c.tc.Args, update)
}

// sendEnd emits the call's tool_execution_end.
func (tb *toolBatch) sendEnd(c *call) {
	out := &llm.ToolOutput{Content: c.res.Content, Details: c.res.Details, Terminate: c.res.Terminate}
	tb.run.send(Event{Type: EventToolExecutionEnd, ToolCallID: c.block.ID, ToolName: c.block.Name, Result: out, IsError: c.res.IsError})
}

// resultMessage appends the call's toolResult message to the conversation
// and emits its message_start/message_end.
func (tb *toolBatch) resultMessage(c *call) llm.Message {
	content := c.res.Content
	if content == nil {
		content = []llm.Content{}
	}
	m := llm.Message{
		Role:       llm.RoleToolResult,
		ToolCallID: c.block.ID,
		ToolName:   c.block.Name,
		Content:    content,
		IsError:    c.res.IsError,
		Timestamp:  tb.run.a.settings.now(),
	}
	if c.res.Details != nil {
		if d, err := llm.MarshalJSONNoEscape(c.res.Details); err == nil {
			m.Details = json.RawMessage(d)
		}
	}
	tb.run.a.msgs.add(m)
	s, e := m, m
	tb.run.send(Event{Type: EventMessageStart, Message: &s})
	tb.run.send(Event{Type: EventMessageEnd, Message: &e})
	return m
}
