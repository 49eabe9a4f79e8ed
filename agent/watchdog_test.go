package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

// chatty is a tool that reports progress every tick until its context
// ends (or, with total > 0, until total has passed).
func chatty(tick, total time.Duration) *agenttest.Tool {
	return &agenttest.Tool{Name: "chatty", Fn: func(ctx context.Context, _ string, _ json.RawMessage, update func(llm.ToolOutput)) (llm.ToolOutput, error) {
		t := time.NewTicker(tick)
		defer t.Stop()
		var end <-chan time.Time
		if total > 0 {
			end = time.After(total)
		}
		for {
			select {
			case <-ctx.Done():
				return llm.ToolOutput{}, ctx.Err()
			case <-end:
				return agenttest.TextOutput("done"), nil
			case <-t.C:
				update(agenttest.TextOutput("working"))
			}
		}
	}}
}

func TestWatchdog(t *testing.T) {
	call := agenttest.Reply(agenttest.Call("c1", "chatty", `{}`))
	tests := []struct {
		name    string
		wd      agent.Watchdog
		tools   []agent.Tool
		turns   []agenttest.Turn
		stopped string // the limit's key, "" when the run must finish
	}{
		{"idle: a model that hangs", agent.Watchdog{MaxIdle: 50 * time.Millisecond},
			nil, []agenttest.Turn{{Content: []llm.Content{agenttest.Text("thinking…")}, Hang: true}}, "agent.max_idle"},
		{"idle: a limit whose text holds a status (500ms) is not retried", agent.Watchdog{MaxIdle: 500 * time.Millisecond},
			nil, []agenttest.Turn{{Content: []llm.Content{agenttest.Text("thinking…")}, Hang: true}, agenttest.Reply(agenttest.Text("unreachable"))}, "agent.max_idle"},
		{"idle: a tool that never reports", agent.Watchdog{MaxIdle: 50 * time.Millisecond},
			[]agent.Tool{agenttest.Blocking("chatty", "killed", nil)}, []agenttest.Turn{call, agenttest.Reply(agenttest.Text("unreachable"))}, "agent.max_idle"},
		{"run: busy past the wall-clock limit", agent.Watchdog{MaxRun: 200 * time.Millisecond, MaxIdle: time.Minute},
			[]agent.Tool{chatty(5*time.Millisecond, 0)}, []agenttest.Turn{call, agenttest.Reply(agenttest.Text("unreachable"))}, "agent.max_run"},
		{"idle: progress keeps the run alive", agent.Watchdog{MaxRun: time.Minute, MaxIdle: 500 * time.Millisecond},
			[]agent.Tool{chatty(10*time.Millisecond, 1500*time.Millisecond)}, []agenttest.Turn{call, agenttest.Reply(agenttest.Text("all done"))}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var stops []string
			tt.wd.OnStop = func(key string) {
				mu.Lock()
				defer mu.Unlock()
				stops = append(stops, key)
			}
			model := agenttest.NewScript(agenttest.ModelInfo(), tt.turns...)
			a := agent.New(agent.Config{Model: model, Tools: tt.tools, Watchdog: tt.wd,
				Retry: agent.RetryConfig{Enabled: true, Sleep: func(context.Context, time.Duration) error { return nil }}}, nil)
			rec := &recorder{}
			if err := a.Prompt(t.Context(), rec.emit, llm.UserText("go", 0)); err != nil {
				t.Fatal(err)
			}
			msgs := a.Messages()
			last := msgs[len(msgs)-1]
			mu.Lock()
			defer mu.Unlock()
			for _, e := range rec.events {
				if e.Type == agent.EventAutoRetryStart {
					t.Error("a stopped run was retried")
				}
			}
			if tt.stopped == "" {
				if len(stops) != 0 || last.StopReason != llm.StopStop || last.Text() != "all done" {
					t.Fatalf("the run was stopped (%v): last message %s %q %q", stops, last.StopReason, last.Text(), last.ErrorMessage)
				}
				return
			}
			if last.Role != llm.RoleAssistant || last.StopReason != llm.StopError || !strings.Contains(last.ErrorMessage, "("+tt.stopped+")") {
				t.Errorf("last message %s %s %q: want an error naming %s", last.Role, last.StopReason, last.ErrorMessage, tt.stopped)
			}
			if len(stops) != 1 || stops[0] != tt.stopped {
				t.Errorf("OnStop calls %v, want one for %s", stops, tt.stopped)
			}
			// The message the session records (message_end) says the same.
			var end *llm.Message
			for _, e := range rec.events {
				if e.Type == agent.EventMessageEnd && e.Message.Role == llm.RoleAssistant {
					end = e.Message
				}
			}
			if end == nil || end.ErrorMessage != last.ErrorMessage {
				t.Errorf("message_end %+v differs from the conversation's last message %q", end, last.ErrorMessage)
			}
		})
	}
}

func TestAbortIsNotAWatchdogStop(t *testing.T) {
	var stops int
	model := agenttest.NewScript(agenttest.ModelInfo(), agenttest.Turn{Hang: true})
	a := agent.New(agent.Config{Model: model, Watchdog: agent.Watchdog{MaxIdle: time.Hour, OnStop: func(string) { stops++ }}}, nil)
	rec := &recorder{hook: func(e agent.Event) {
		if e.Type == agent.EventMessageStart && e.Message.Role == llm.RoleAssistant {
			go a.Abort()
		}
	}}
	if err := a.Prompt(t.Context(), rec.emit, llm.UserText("go", 0)); err != nil {
		t.Fatal(err)
	}
	msgs := a.Messages()
	if last := msgs[len(msgs)-1]; last.StopReason != llm.StopAborted || stops != 0 {
		t.Errorf("after Abort: %s %q, %d watchdog stops; want aborted and none", last.StopReason, last.ErrorMessage, stops)
	}
}

// TestStopErrorText: a stop names its limit as configured and its key; its
// words are not chosen to dodge pi's retry pattern (the run is not retried
// because its watchdog stopped it, see TestWatchdog).
func TestStopErrorText(t *testing.T) {
	for _, tc := range []struct {
		e    *agent.StopError
		want string
	}{
		{&agent.StopError{Key: "agent.max_run", Limit: 30 * time.Minute}, "limit of 30m0s (agent.max_run)"},
		{&agent.StopError{Key: "agent.max_idle", Limit: 500 * time.Millisecond}, "for 500ms (agent.max_idle)"},
	} {
		if !strings.Contains(tc.e.Error(), tc.want) {
			t.Errorf("%q: want %q", tc.e.Error(), tc.want)
		}
	}
}
