package agent

import (
	"context"
	"encoding/json"

	"github.com/pibot/pibot/llm"
)

// Tool is a tool the model can call. Package tools implements it.
//
// Execute runs the call. It must stop promptly when ctx is cancelled (the
// run was aborted). A returned error becomes an error result whose text is
// the error's message; it never stops the run. update reports partial
// output; it may be called from any goroutine until Execute returns.
type Tool interface {
	Spec() llm.ToolSpec
	Execute(ctx context.Context, callID string, args json.RawMessage, update func(llm.ToolOutput)) (llm.ToolOutput, error)
}

// SequentialTool is implemented by tools that must not run concurrently
// with other tools: when a batch of calls includes such a tool (and
// Sequential reports true), the whole batch runs one call at a time.
type SequentialTool interface {
	Sequential() bool
}

// ToolCall is one tool call of an assistant message, as hooks see it.
type ToolCall struct {
	ID   string
	Name string
	// Args are the validated (and coerced) arguments.
	Args json.RawMessage
	// Assistant is the assistant message that made the call.
	Assistant *llm.Message
}

// Decision is what a BeforeToolCall hook decides.
type Decision struct {
	// Block skips the call; the result is an error with Reason as text
	// ("Tool execution was blocked" when empty).
	Block  bool
	Reason string
	// Args, when non-nil, replaces the call's arguments.
	Args json.RawMessage
}

// ToolResult is the finalized result of a call, which an AfterToolCall hook
// may change in place.
type ToolResult struct {
	Content   []llm.Content
	Details   any
	IsError   bool
	Terminate bool
}

// Hooks let the embedding application intercept the loop. Every hook is
// optional and is called from the run goroutine.
type Hooks struct {
	// BeforeToolCall runs after argument validation. It may block the call
	// or rewrite its arguments. An error blocks the call with the error's
	// text.
	BeforeToolCall func(ctx context.Context, c ToolCall) (Decision, error)
	// AfterToolCall runs after a tool finished and may override content,
	// details, isError and terminate. An error turns the result into an
	// error result with the error's text.
	AfterToolCall func(ctx context.Context, c ToolCall, out *ToolResult) error
	// TransformContext rewrites the messages before each model call (before
	// conversion to model messages). An error fails the run.
	TransformContext func(ctx context.Context, msgs []llm.Message) ([]llm.Message, error)
	// BeforeModelCall runs before every model call of a run (retries
	// included) with the model and the request about to be sent; req is
	// the agent's and must not be changed. An error refuses the call: the
	// run ends with an assistant error message carrying the error's text
	// (message_start and message_end as for a failed call), and it is not
	// retried. Otherwise after, when not nil, is called with the call's
	// final message (its usage) once the model's stream has ended, before
	// that message's message_end. Spend caps reserve and settle here.
	BeforeModelCall func(ctx context.Context, model llm.ModelInfo, req llm.Request) (after func(llm.Message), err error)
}
