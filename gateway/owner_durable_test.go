package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// TestToolCallDurableBeforeTheToolRuns: when a tool starts, the assistant
// message that calls it is already in the session file on disk, so a crash
// during the tool resumes from it instead of running the tool again; once
// the tool has answered, its result is on disk too.
func TestToolCallDurableBeforeTheToolRuns(t *testing.T) {
	var h *harness
	onDisk := func(want func(session.Entry) bool) error {
		for _, p := range h.sessions() {
			for _, e := range h.entries(p) {
				if want(e) {
					return nil
				}
			}
		}
		return fmt.Errorf("not in the session files %q", h.sessions())
	}
	seen := make(chan error, 2)
	probe := &agenttest.Tool{Name: "probe", Fn: func(_ context.Context, id string, _ json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		seen <- onDisk(func(e session.Entry) bool {
			if e.Type != session.TypeMessage || e.Message.Role != llm.RoleAssistant {
				return false
			}
			for _, c := range e.Message.ToolCalls() {
				if c.ID == id {
					return true
				}
			}
			return false
		})
		return agenttest.TextOutput("probed " + id), nil
	}}
	h = newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "probe", `{}`)), faux.ToolCalls(faux.Call("c2", "probe", `{}`)), faux.Text("done")},
		withTools(probe))
	h.send("probe twice")
	for range 2 {
		if err := <-seen; err != nil {
			t.Fatalf("tool ran before its call was durable: %v", err)
		}
	}
	// The second call ran after the first result was recorded.
	if err := onDisk(func(e session.Entry) bool {
		return e.Type == session.TypeMessage && e.Message.Role == llm.RoleToolResult && e.Message.ToolCallID == "c1"
	}); err != nil {
		t.Fatalf("first tool result: %v", err)
	}
	h.waitText(dmConv, "done")
}
