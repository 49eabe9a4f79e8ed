package agent_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

func TestQueueModes(t *testing.T) {
	tests := []struct {
		mode     agent.QueueMode
		wantReqs int
	}{
		{agent.QueueOneAtATime, 2},
		{agent.QueueAll, 1},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Text("1")), agenttest.Reply(agenttest.Text("2")), agenttest.Reply(agenttest.Text("3")))
			a := newAgent(m, nil, func(c *agent.Config) { c.SteeringMode = tt.mode })
			a.SteerTagged(agent.Tagged{Message: user("s1")})
			a.SteerTagged(agent.Tagged{Message: user("s2")})
			if ev := a.QueueUpdate(); len(ev.Steering) != 2 {
				t.Fatalf("queue_update = %+v", ev)
			}
			r := &recorder{}
			prompt(t, a, r, "p")
			if got := len(m.Requests()); got != tt.wantReqs {
				t.Errorf("model calls = %d, want %d", got, tt.wantReqs)
			}
			// The steering messages come right after the prompt.
			msgs := a.Messages()
			if msgs[0].Text() != "p" || msgs[1].Text() != "s1" {
				t.Errorf("messages = %v %v", msgs[0].Text(), msgs[1].Text())
			}
			var updates []string
			for _, e := range r.events {
				if e.Type == agent.EventQueueUpdate {
					updates = append(updates, line(e))
				}
			}
			want := []string{`queue_update ["s2"] []`, `queue_update [] []`}
			if len(updates) != 2 || updates[0] != want[0] || updates[1] != want[1] {
				t.Errorf("queue updates = %q, want %q", updates, want)
			}
		})
	}
}

func TestContinue(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Text("a")), agenttest.Reply(agenttest.Text("b")), agenttest.Reply(agenttest.Text("c")))
	a := newAgent(m, nil, nil)
	if err := a.Continue(t.Context(), nil); err == nil {
		t.Error("Continue on empty conversation succeeded")
	}
	a.SetMessages([]llm.Message{user("q")})
	r := &recorder{}
	if err := a.Continue(t.Context(), r.emit); err != nil {
		t.Fatal(err)
	}
	checkLines(t, r.lines(), expand("agent_start", "turn_start", "message_start assistant", "text 0", "message_end assistant", "turn_end", "agent_end"))
	if err := a.Continue(t.Context(), nil); err == nil {
		t.Error("Continue after assistant with empty queues succeeded")
	}
	a.FollowUpTagged(agent.Tagged{Message: user("more")})
	r = &recorder{}
	if err := a.Continue(t.Context(), r.emit); err != nil {
		t.Fatal(err)
	}
	checkLines(t, r.lines(), expand("agent_start", "turn_start", `queue_update [] []`, "message_start user", "message_end user",
		"message_start assistant", "text 0", "message_end assistant", "turn_end", "agent_end"))
}

func TestPromptWhileRunning(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Text("a")))
	var a *agent.Agent
	var inner error
	r := &recorder{hook: func(e agent.Event) {
		if e.Type == agent.EventTurnStart && inner == nil {
			inner = a.Prompt(t.Context(), nil, user("x"))
			if inner == nil {
				inner = errors.New("nil")
			}
		}
	}}
	a = newAgent(m, nil, nil)
	prompt(t, a, r, "hi")
	if !errors.Is(inner, agent.ErrRunning) {
		t.Errorf("nested Prompt = %v, want ErrRunning", inner)
	}
}

// TestConcurrentSteer exercises Steer/Queued/Messages from other
// goroutines while a run is active (run with -race).
func TestConcurrentSteer(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{})
	for range 20 {
		m.Push(agenttest.Reply(agenttest.Text("x")))
	}
	a := newAgent(m, nil, func(c *agent.Config) { c.SteeringMode = agent.QueueAll })
	started := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-started
		for range 5 {
			a.SteerTagged(agent.Tagged{Message: user("s")})
			a.Queued()
			a.Messages()
			a.Running()
		}
	}()
	r := &recorder{hook: func(e agent.Event) {
		if e.Type == agent.EventAgentStart {
			once.Do(func() { close(started) })
		}
	}}
	prompt(t, a, r, "go")
	wg.Wait()
	s, _ := a.Queued()
	injected := 0
	for _, msg := range a.Messages() {
		if msg.Role == llm.RoleUser && msg.Text() == "s" {
			injected++
		}
	}
	if injected+len(s) != 5 {
		t.Errorf("steering messages lost: injected %d + queued %d != 5", injected, len(s))
	}
}
