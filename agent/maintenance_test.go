package agent_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/llm"
)

// fakeCompactor stands in for the session side: it returns a summary
// message followed by the last user message.
type fakeCompactor struct {
	reasons      []string
	instructions []string
	err          error
	a            *agent.Agent
}

func (f *fakeCompactor) compact(_ context.Context, reason, instr string) (*compaction.Result, []llm.Message, error) {
	f.reasons = append(f.reasons, reason)
	f.instructions = append(f.instructions, instr)
	if f.err != nil {
		return nil, nil, f.err
	}
	msgs := []llm.Message{{Role: llm.RoleCompactionSummary, Summary: "sum", Timestamp: 1}}
	for _, m := range f.a.Messages() {
		if m.Role == llm.RoleUser {
			msgs = append(msgs[:1], m)
		}
	}
	return &compaction.Result{Summary: "sum", FirstKeptEntryID: "e1"}, msgs, nil
}

func maintenanceSetup(turns ...agenttest.Turn) (*agent.Agent, *agent.Maintenance, *fakeCompactor, *agenttest.Script) {
	m := agenttest.NewScript(llm.ModelInfo{}, turns...)
	a := newAgent(m, nil, nil)
	f := &fakeCompactor{a: a}
	mt := agent.NewMaintenance(compaction.DefaultSettings(), f.compact)
	mt.Now = func() time.Time { return time.UnixMilli(1) }
	return a, mt, f, m
}

func TestMaintenanceOverflowCompactsAndContinuesOnce(t *testing.T) {
	a, mt, f, _ := maintenanceSetup(
		agenttest.Fail("prompt is too long: 213000 tokens > 200000 maximum"),
		agenttest.Reply(agenttest.Text("recovered")))
	r := &recorder{hook: mt.Observe}
	prompt(t, a, r, "big")
	r.events = nil
	if err := mt.AfterRun(t.Context(), a, r.emit); err != nil {
		t.Fatal(err)
	}
	checkLines(t, r.lines(), expand("compaction_start", "compaction_end",
		"agent_start", "turn_start", "message_start assistant", "text 0", "message_end assistant", "turn_end", "agent_end"))
	if end := r.events[1]; !end.WillRetry || end.Reason != "overflow" || end.Compaction == nil {
		t.Errorf("compaction_end = %+v", end)
	}
	msgs := a.Messages()
	if len(msgs) != 3 || msgs[0].Role != llm.RoleCompactionSummary || msgs[2].Text() != "recovered" {
		t.Errorf("messages = %+v", msgs)
	}
	if len(f.reasons) != 1 {
		t.Errorf("compactions = %v", f.reasons)
	}
}

func TestMaintenanceOverflowSecondTimeFails(t *testing.T) {
	over := agenttest.Fail("prompt is too long")
	a, mt, f, _ := maintenanceSetup(over, over)
	r := &recorder{hook: mt.Observe}
	prompt(t, a, r, "big")
	r.events = nil
	if err := mt.AfterRun(t.Context(), a, r.emit); err != nil {
		t.Fatal(err)
	}
	r.events = nil
	if err := mt.AfterRun(t.Context(), a, r.emit); err != nil {
		t.Fatal(err)
	}
	if len(r.events) != 1 || r.events[0].Type != agent.EventCompactionEnd || r.events[0].ErrorMessage == "" {
		t.Errorf("events = %v", r.lines())
	}
	if len(f.reasons) != 1 {
		t.Errorf("compactions = %v", f.reasons)
	}
}

func TestMaintenanceThreshold(t *testing.T) {
	tests := []struct {
		name   string
		tokens int64
		want   int
	}{
		{"below", 100000, 0},
		{"above", 120000, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, mt, f, _ := maintenanceSetup(agenttest.Turn{Content: []llm.Content{agenttest.Text("x")}, Usage: llm.Usage{TotalTokens: tt.tokens}})
			prompt(t, a, &recorder{}, "q")
			r := &recorder{}
			if err := mt.AfterRun(t.Context(), a, r.emit); err != nil {
				t.Fatal(err)
			}
			if len(f.reasons) != tt.want {
				t.Fatalf("compactions = %v", f.reasons)
			}
			if tt.want == 1 {
				checkLines(t, r.lines(), []string{"compaction_start", "compaction_end"})
				if r.events[1].WillRetry || f.reasons[0] != "threshold" {
					t.Errorf("end = %+v", r.events[1])
				}
				// Checked once: the same message does not trigger again.
				if err := mt.AfterRun(t.Context(), a, r.emit); err != nil || len(f.reasons) != 1 {
					t.Errorf("second check compacted again: %v", f.reasons)
				}
			}
		})
	}
}

func TestMaintenanceManualAndFailure(t *testing.T) {
	a, mt, f, _ := maintenanceSetup(agenttest.Reply(agenttest.Text("x")))
	prompt(t, a, &recorder{}, "q")
	res, err := mt.Manual(t.Context(), a, nil, "keep the API names")
	if err != nil || res.FirstKeptEntryID != "e1" || f.instructions[0] != "keep the API names" || f.reasons[0] != "manual" {
		t.Errorf("manual = %+v, %v, %v", res, err, f)
	}
	f.err = errors.New("model down")
	r := &recorder{}
	if _, err := mt.Manual(t.Context(), a, r.emit, ""); err == nil {
		t.Error("failure not reported")
	}
	if end := r.events[len(r.events)-1]; end.ErrorMessage != "model down" || end.Compaction != nil {
		t.Errorf("end = %+v", end)
	}
}

// TestMaintenanceOverflowNothingToCompact: an overflow on a branch with
// nothing to summarize (the first message was too long) is not an error
// of the run: compaction_end carries no error, the provider's error stays
// the last message, and nothing is continued. So is a threshold crossing
// with nothing to summarize.
func TestMaintenanceOverflowNothingToCompact(t *testing.T) {
	for _, reason := range []string{"overflow", "threshold"} {
		t.Run(reason, func(t *testing.T) {
			turn := agenttest.Fail("prompt is too long: 213000 tokens > 200000 maximum")
			if reason == "threshold" {
				turn = agenttest.Turn{Content: []llm.Content{agenttest.Text("x")}, Usage: llm.Usage{TotalTokens: 190000}}
			}
			a, mt, f, _ := maintenanceSetup(turn)
			f.err = fmt.Errorf("compact: %w", compaction.ErrNothingToCompact)
			r := &recorder{hook: mt.Observe}
			prompt(t, a, r, "big")
			r.events = nil
			if err := mt.AfterRun(t.Context(), a, r.emit); err != nil {
				t.Fatalf("AfterRun: %v", err)
			}
			checkLines(t, r.lines(), []string{"compaction_start", "compaction_end"})
			if end := r.events[1]; end.ErrorMessage != "" || end.WillRetry || end.Reason != reason {
				t.Errorf("compaction_end = %+v", end)
			}
			msgs := a.Messages()
			if last := msgs[len(msgs)-1]; len(msgs) != 2 || last.Role != llm.RoleAssistant {
				t.Errorf("messages = %+v", msgs)
			}
		})
	}
}

// TestMaintenanceSilentOverflowAnswerStands: a silent overflow (the answer
// succeeded, its usage is over the window) compacts and continues like
// pi; the continuation has nothing to do (the answer is the last message)
// and, as in pi, that is no error.
func TestMaintenanceSilentOverflowAnswerStands(t *testing.T) {
	info := agenttest.ModelInfo()
	info.ContextWindow = 1000
	m := agenttest.NewScript(info, agenttest.Turn{Content: []llm.Content{agenttest.Text("the answer")}, Usage: llm.Usage{Input: 1500}})
	a := newAgent(m, nil, nil)
	f := &fakeCompactor{a: a}
	mt := agent.NewMaintenance(compaction.DefaultSettings(), func(ctx context.Context, reason, instr string) (*compaction.Result, []llm.Message, error) {
		res, _, err := f.compact(ctx, reason, instr)
		// The session keeps the answer: the rebuilt context ends with it.
		return res, []llm.Message{{Role: llm.RoleCompactionSummary, Summary: "sum"}, llm.UserText("q", 1), {Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("the answer")}, StopReason: llm.StopStop}}, err
	})
	r := &recorder{hook: mt.Observe}
	prompt(t, a, r, "q")
	if err := mt.AfterRun(t.Context(), a, r.emit); err != nil {
		t.Fatalf("AfterRun: %v", err)
	}
	if len(f.reasons) != 1 || f.reasons[0] != "overflow" {
		t.Fatalf("compactions %v", f.reasons)
	}
	msgs := a.Messages()
	if last := msgs[len(msgs)-1]; last.Text() != "the answer" {
		t.Fatalf("last message %+v", last)
	}
}
