package gateway_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/providers/faux"
)

// Where the platform shows a queued message's notice as a message (no
// reaction), the notice is edited once the message was taken: it never
// keeps saying "will steer the current run" about a message the run took
// long ago. A message queued to a run that ended before it took it is
// taken up by the next run, and its notice says so; a dropped one says
// dropped, in the notice itself.
func TestQueueNoticeSettles(t *testing.T) {
	tests := []struct {
		name, send, queued, settled string
		// next: the run ends before taking the message.
		script []faux.Turn
		drop   bool
		mode   string // agent.queue.mode
	}{
		{name: "steer", send: "also consider X", queued: "will steer the current run", settled: "✅ steered into the run",
			script: []faux.Turn{faux.ToolCalls(faux.Call("c1", "work", `{}`)), faux.Text("after steer")}},
		{name: "follow-up", send: "/followup then do Y", queued: "queued as a follow-up", settled: "✅ taken up as a follow-up",
			script: []faux.Turn{faux.ToolCalls(faux.Call("c1", "work", `{}`)), faux.Text("first done"), faux.Text("after follow-up")}},
		{name: "dropped", send: "/followup then do Y", queued: "queued as a follow-up", settled: "❌ dropped: /queue drop", drop: true,
			script: []faux.Turn{faux.ToolCalls(faux.Call("c1", "work", `{}`)), faux.Text("first done")}},
		{name: "interrupt", send: "stop that, do Z", queued: "interrupting the current run", settled: "✅ taken up by the next run", mode: "interrupt",
			script: []faux.Turn{faux.ToolCalls(faux.Call("c1", "work", `{}`)), faux.Text("after the interruption")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGate()
			h := newHarness(t, tt.script, withTools(g.tool("work")), withConfig(func(c *gateway.Config) { c.QueueMode = tt.mode }))
			h.send("do it")
			<-g.started
			h.ad.FailNext(chattest.MethodReact, 1, errors.New("reactions are off here"))
			h.send(tt.send)
			// (The notice may be settled at once: an interrupted run ends
			// quickly and the next one takes the message.)
			h.waitFor("the queue notice", func() bool {
				for _, c := range chattest.Filter(h.ad.Calls(), chattest.MethodSend) {
					if strings.Contains(c.Text, tt.queued) {
						return true
					}
				}
				return false
			})
			if tt.drop {
				h.send("/queue drop")
			}
			close(g.release)
			h.waitText(dmConv, tt.settled)
			var notices []string
			for _, m := range h.ad.Messages(dmConv) {
				if strings.Contains(m, tt.queued) {
					t.Errorf("a notice still says %q:\n%s", tt.queued, strings.Join(h.ad.Messages(dmConv), "\n---\n"))
				}
				if strings.Contains(m, "dropped") {
					notices = append(notices, m)
				}
			}
			if tt.drop && len(notices) != 1 {
				t.Errorf("%d messages say dropped, want the notice alone: %q", len(notices), notices)
			}
		})
	}
}
