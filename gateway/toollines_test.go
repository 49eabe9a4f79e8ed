package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/stream"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// TestToolLinesThroughGateway: the gateway hands the stream controller a
// tool's whole arguments and output, so Verbose shows the first ten lines
// of the output and the whole command (it used to get one line of 200
// characters and a command cut at 80), while Tools shows exactly what it
// showed before.
func TestToolLinesThroughGateway(t *testing.T) {
	var out strings.Builder
	for i := range 15 {
		fmt.Fprintf(&out, "line %02d of the output\n", i)
	}
	command := "go test -run 'TestToolLinesThroughGateway|TestVerbose' -count=1 -race ./gateway/ ./gateway/stream/ ./chat/..."
	args, _ := json.Marshal(map[string]string{"command": command})
	tests := []struct {
		name     string
		v        stream.Verbosity
		fail     bool
		want     []string
		dontWant []string
	}{
		{"verbose", stream.Verbose, false,
			[]string{"```\nline 00 of the output\nline 01 of the output\n", "line 09 of the output\n…\n```", command},
			[]string{"line 10"}},
		{"tools", stream.Tools, false,
			[]string{"✓ `bash · go test -run 'TestToolLinesThroughGateway|TestVerbose' -cou… · "},
			[]string{"line 00"}},
		{"tools error", stream.Tools, true,
			[]string{"` — line 00 of the output line 01 of the output line 02 of the output line 03 of th…\n\nall done"},
			[]string{"line 04"}},
		{"quiet", stream.Quiet, true, []string{"all done"}, []string{"bash", "line 00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := &agenttest.Tool{Name: "bash", Fn: func(context.Context, string, json.RawMessage, func(llm.ToolOutput)) (llm.ToolOutput, error) {
				if tt.fail {
					return llm.ToolOutput{}, errors.New(out.String())
				}
				return agenttest.TextOutput(out.String()), nil
			}}
			h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "bash", string(args))), faux.Text("all done")},
				withTools(tool), withConfig(func(c *gateway.Config) { c.Verbosity = tt.v }))
			h.send("run the tests")
			h.waitText(dmConv, "all done")
			msgs := h.ad.Messages(dmConv)
			got := msgs[len(msgs)-1]
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("reply lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.dontWant {
				if strings.Contains(got, w) {
					t.Errorf("reply shows %q:\n%s", w, got)
				}
			}
		})
	}
}
