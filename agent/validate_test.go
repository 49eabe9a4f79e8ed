package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

const editSchema = `{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer","minimum":1},
"mode":{"type":"string","enum":["a","b"]},"flag":{"type":"boolean"},
"edits":{"type":"array","minItems":1,"items":{"type":"object","properties":{"oldText":{"type":"string"},"newText":{"type":"string"}},"required":["oldText","newText"],"additionalProperties":false}}},
"required":["path"]}`

// TestValidation runs a call through the loop and checks what the tool
// receives (coerced arguments) or the error text the model sees.
func TestValidation(t *testing.T) {
	tests := []struct {
		name     string
		args     string
		wantArgs string
		wantErr  string
	}{
		{"valid", `{"path":"a","limit":3}`, `{"path":"a","limit":3}`, ""},
		{"coerced", `{"limit":"5","path":7,"flag":"true"}`, `{"limit":5,"path":"7","flag":true}`, ""},
		{"minimum", `{"path":"a","limit":0}`, "", "  - limit: must be >= 1"},
		{"integer", `{"path":"a","limit":1.5}`, "", "  - limit: must be integer"},
		{"enum", `{"path":"a","mode":"c"}`, "", "  - mode: must be equal to one of the allowed values"},
		{"nested required", `{"path":"a","edits":[{"oldText":"x"}]}`, "", "  - edits/0: must have required property 'newText'"},
		{"additional", `{"path":"a","edits":[{"oldText":"x","newText":"y","z":1}]}`, "", "  - edits/0: must NOT have additional properties"},
		{"min items", `{"path":"a","edits":[]}`, "", "  - edits: must NOT have fewer than 1 items"},
		{"not object", `[1]`, "", "  - root: must be object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got json.RawMessage
			tool := &agenttest.Tool{Name: "edit", Params: json.RawMessage(editSchema),
				Fn: func(_ context.Context, _ string, args json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
					got = args
					return agenttest.TextOutput("ok"), nil
				}}
			m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Call("c", "edit", tt.args)), agenttest.Reply(agenttest.Text("k")))
			a := newAgent(m, []agent.Tool{tool}, nil)
			prompt(t, a, &recorder{}, "go")
			result := a.Messages()[2]
			if tt.wantErr == "" {
				if result.IsError || string(got) != tt.wantArgs {
					t.Errorf("args = %s (result %q), want %s", got, result.Text(), tt.wantArgs)
				}
				return
			}
			var pretty = "Validation failed for tool \"edit\":\n" + tt.wantErr + "\n\nReceived arguments:\n"
			if !result.IsError || len(result.Text()) < len(pretty) || result.Text()[:len(pretty)] != pretty {
				t.Errorf("result = %q, want prefix %q", result.Text(), pretty)
			}
		})
	}
}
