package gateway_test

import (
	"sync/atomic"
	"testing"

	"github.com/pibot/pibot/providers/faux"
)

// An MCP tool (SERVER__tool) in a group asks by default: the configured
// group policy names only pibot's own tools.
func TestApprovalMCPToolAsksInGroup(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "fs__delete_file", `{"path":"notes.txt"}`)), faux.Text("deleted")},
		withTools(countingTool("fs__delete_file", &n)))
	h.send("delete notes", groupMsg("delete notes", "alice")...)
	ids := h.approvalButtons(groupConv)
	h.waitText(groupConv, "Approve `fs__delete_file`", "notes.txt")
	if n.Load() != 0 {
		t.Fatal("MCP tool ran before approval")
	}
	h.press(groupConv, "alice", ids[0])
	h.waitText(groupConv, "deleted")
	if n.Load() != 1 {
		t.Fatalf("tool ran %d times", n.Load())
	}
}
