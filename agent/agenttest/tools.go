package agenttest

import (
	"context"
	"encoding/json"

	"github.com/pibot/pibot/llm"
)

// Tool is a configurable fake tool.
type Tool struct {
	Name string
	// Params is the JSON schema; nil means an object with no constraints.
	Params json.RawMessage
	// Seq makes the tool demand sequential execution.
	Seq bool
	// Fn runs the call; nil returns the text "ok".
	Fn func(ctx context.Context, id string, args json.RawMessage, update func(llm.ToolOutput)) (llm.ToolOutput, error)
}

// Spec implements agent.Tool.
func (t *Tool) Spec() llm.ToolSpec {
	p := t.Params
	if p == nil {
		p = json.RawMessage(`{"type":"object"}`)
	}
	return llm.ToolSpec{Name: t.Name, Description: "fake " + t.Name, Parameters: p}
}

// Execute implements agent.Tool.
func (t *Tool) Execute(ctx context.Context, id string, args json.RawMessage, update func(llm.ToolOutput)) (llm.ToolOutput, error) {
	if t.Fn == nil {
		return TextOutput("ok"), nil
	}
	return t.Fn(ctx, id, args, update)
}

// Sequential implements agent.SequentialTool.
func (t *Tool) Sequential() bool { return t.Seq }

// TextOutput returns a tool output with one text block.
func TextOutput(s string) llm.ToolOutput {
	return llm.ToolOutput{Content: []llm.Content{llm.TextBlock(s)}}
}

// Blocking returns a tool that runs until its context is cancelled and then
// fails with errText; started is closed when it begins (may be nil).
func Blocking(name, errText string, started chan<- struct{}) *Tool {
	return &Tool{Name: name, Fn: func(ctx context.Context, _ string, _ json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		if started != nil {
			close(started)
		}
		<-ctx.Done()
		return llm.ToolOutput{}, textError(errText)
	}}
}

type textError string

func (e textError) Error() string { return string(e) }
