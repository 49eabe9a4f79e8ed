package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

// meter is a BeforeModelCall hook that lets budget calls through and
// refuses the next, recording what it saw.
type meter struct {
	budget int
	seen   []int          // messages in each request asked about
	usage  []llm.Usage    // what after saw, per call
	ended  map[int64]bool // output tokens whose message_end came before after
	ends   *recorder
}

func (m *meter) before(_ context.Context, _ llm.ModelInfo, req llm.Request) (func(llm.Message), error) {
	m.seen = append(m.seen, len(req.Messages))
	if len(m.seen) > m.budget {
		return nil, errors.New("⛔ no room for the next model call")
	}
	return func(msg llm.Message) {
		m.usage = append(m.usage, msg.Usage)
		for _, e := range m.ends.events {
			if e.Type == agent.EventMessageEnd && e.Message.Role == llm.RoleAssistant && e.Message.Usage.Output == msg.Usage.Output {
				m.ended[msg.Usage.Output] = true
			}
		}
	}, nil
}

// TestBeforeModelCall: the hook is asked before every model call of a run
// (each turn of a tool loop), sees each call's usage before its
// message_end, and a refusal ends the run with an error message carrying
// its text, without calling the model and without a retry.
func TestBeforeModelCall(t *testing.T) {
	turn := func(out int64) agenttest.Turn {
		tu := agenttest.Reply(agenttest.Call("c", "echo", `{}`))
		tu.Usage = llm.Usage{Input: 100, Output: out}
		return tu
	}
	m := agenttest.NewScript(llm.ModelInfo{}, turn(1), turn(2), turn(3), turn(4))
	r := &recorder{}
	mt := &meter{budget: 2, ended: map[int64]bool{}, ends: r}
	s := &fakeSleep{}
	a := newAgent(m, []agent.Tool{echoTool("echo")}, func(c *agent.Config) {
		c.Hooks.BeforeModelCall = mt.before
		c.Retry = agent.DefaultRetry()
		c.Retry.Sleep = s.sleep
	})
	prompt(t, a, r, "loop")
	if n := len(m.Requests()); n != 2 {
		t.Fatalf("model calls = %d, want 2 (the third was refused)", n)
	}
	if len(mt.seen) != 3 || mt.seen[0] != 1 || mt.seen[1] != 3 || mt.seen[2] != 5 {
		t.Errorf("hook saw requests of %v messages, want [1 3 5]", mt.seen)
	}
	if len(mt.usage) != 2 || mt.usage[0].Output != 1 || mt.usage[1].Output != 2 {
		t.Errorf("after saw %+v, want each call's usage", mt.usage)
	}
	if len(mt.ended) != 0 {
		t.Errorf("after ran after the message_end of %v", mt.ended)
	}
	if len(s.delays) != 0 {
		t.Errorf("a refused call was retried (delays %v)", s.delays)
	}
	last := a.Messages()[len(a.Messages())-1]
	if last.Role != llm.RoleAssistant || last.StopReason != llm.StopError || last.ErrorMessage != "⛔ no room for the next model call" {
		t.Errorf("last message = %+v, want the refusal as an error", last)
	}
	checkLines(t, r.lines()[len(r.lines())-4:], []string{"message_start assistant", "message_end assistant", "turn_end", "agent_end"})
}
