package sessionrun

import (
	"errors"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// written is one append seen by fakeHead.
type written struct {
	e    session.Entry
	sync session.SyncPolicy
}

// fakeHead records appends instead of writing them; err fails them.
type fakeHead struct {
	out []written
	err error
}

func (h *fakeHead) Leaf() string { return "leaf" }

func (h *fakeHead) Append(e session.Entry, sync session.SyncPolicy) (session.Entry, error) {
	if h.err != nil {
		return session.Entry{}, h.err
	}
	h.out = append(h.out, written{e, sync})
	e.ID = "id"
	return e, nil
}

func newFile(t *testing.T) *session.Session {
	t.Helper()
	now := time.Now()
	s, err := session.CreateFile(t.TempDir(), session.Header{ID: session.NewSessionID(now), Timestamp: session.Timestamp(now), Cwd: "/"},
		session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: "off"}, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRecordMessageKinds is the message_end → entry mapping and the sync
// policy of every message kind, with user messages held elsewhere (the
// gateway) and not (pibot chat).
func TestRecordMessageKinds(t *testing.T) {
	call := llm.Content{Type: llm.ContentToolCall, ID: "c1", Name: "ls"}
	custom := llm.Message{Role: llm.RoleCustom, CustomType: "note", Content: []llm.Content{llm.TextBlock("hi")}, StringContent: true, Display: true}
	customBlocks := custom
	customBlocks.StringContent = false
	tests := []struct {
		name     string
		m        llm.Message
		userHeld bool
		typ      string // "" = not recorded
		sync     session.SyncPolicy
		content  string // custom_message content
	}{
		{name: "user", m: llm.UserText("q", 1), typ: session.TypeMessage, sync: session.SyncAlways},
		{name: "user held in an inbox", m: llm.UserText("q", 1), userHeld: true, typ: session.TypeMessage, sync: session.SyncGrouped},
		{name: "answer", m: llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("a")}}, typ: session.TypeMessage, sync: session.SyncGrouped},
		{name: "tool call", m: llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{call}}, userHeld: true, typ: session.TypeMessage, sync: session.SyncAlways},
		{name: "tool result", m: llm.Message{Role: llm.RoleToolResult, ToolCallID: "c1", ToolName: "ls"}, userHeld: true, typ: session.TypeMessage, sync: session.SyncAlways},
		{name: "bash execution", m: llm.Message{Role: llm.RoleBashExecution, Command: "ls"}, userHeld: true, typ: session.TypeMessage, sync: session.SyncGrouped},
		{name: "custom text", m: custom, userHeld: true, typ: session.TypeCustomMessage, sync: session.SyncGrouped, content: `"hi"`},
		{name: "custom blocks", m: customBlocks, typ: session.TypeCustomMessage, sync: session.SyncGrouped, content: `[{"type":"text","text":"hi"}]`},
		{name: "branch summary", m: llm.Message{Role: llm.RoleBranchSummary, Summary: "s"}},
		{name: "compaction summary", m: llm.Message{Role: llm.RoleCompactionSummary, Summary: "s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHead{}
			r := NewRunner(h, Options{UserHeld: tt.userHeld})
			m := tt.m
			// Other events record nothing.
			for _, typ := range []agent.EventType{agent.EventMessageStart, agent.EventMessageUpdate, agent.EventTurnEnd} {
				if _, err := r.Record(agent.Event{Type: typ, Message: &m}); err != nil || len(h.out) != 0 {
					t.Fatalf("%s recorded %+v, %v", typ, h.out, err)
				}
			}
			rec, err := r.Record(agent.Event{Type: agent.EventMessageEnd, Message: &m, Tag: "tag"})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Tag != "tag" {
				t.Errorf("tag %v, want the event's", rec.Tag)
			}
			if tt.typ == "" {
				if len(h.out) != 0 || rec.Entry.ID != "" {
					t.Fatalf("recorded %+v", h.out)
				}
				return
			}
			if len(h.out) != 1 || rec.Entry.ID == "" {
				t.Fatalf("%d entries written, want 1", len(h.out))
			}
			w := h.out[0]
			if w.e.Type != tt.typ || w.sync != tt.sync {
				t.Errorf("entry %s synced %v, want %s synced %v", w.e.Type, w.sync, tt.typ, tt.sync)
			}
			if w.e.Pibot != nil {
				t.Errorf("pibot fields %+v without a Meta option", w.e.Pibot)
			}
			if tt.typ == session.TypeCustomMessage && (string(w.e.Content) != tt.content || w.e.CustomType != "note" || !w.e.Display) {
				t.Errorf("custom_message %s %q display %v", w.e.Content, w.e.CustomType, w.e.Display)
			}
		})
	}
}

// TestRecordWriteFailure: a failed write is reported, not swallowed.
func TestRecordWriteFailure(t *testing.T) {
	boom := errors.New("disk full")
	r := NewRunner(&fakeHead{err: boom}, Options{})
	m := llm.UserText("q", 1)
	if _, err := r.Record(agent.Event{Type: agent.EventMessageEnd, Message: &m}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

// TestTagsTieQueuedMessagesToTheirEntries queues two messages with the
// same millisecond timestamp and the same text through a real agent: each
// entry carries the pibot fields of its own tag, and the timestamps are
// the messages' own.
func TestTagsTieQueuedMessagesToTheirEntries(t *testing.T) {
	s := newFile(t)
	model := faux.New(llm.ModelInfo{Provider: "faux", ID: "m", ContextWindow: 100000}, faux.Text("a0"), faux.Text("a1"), faux.Text("a2"))
	a := agent.New(agent.Config{Model: model}, nil)
	r := NewRunner(NewLeaf(s, s.Tree().Leaf()), Options{UserHeld: true, Meta: func(tag any) *session.Meta {
		if k, ok := tag.(string); ok {
			return &session.Meta{Msg: k}
		}
		return nil
	}})
	const ms = 1700000000000
	a.FollowUpTagged(agent.Tagged{Message: llm.UserText("same", ms), Tag: "first"})
	a.FollowUpTagged(agent.Tagged{Message: llm.UserText("same", ms), Tag: "second"})
	emit := func(e agent.Event) {
		if _, err := r.Record(e); err != nil {
			t.Error(err)
		}
	}
	if err := a.PromptTagged(t.Context(), emit, agent.Tagged{Message: llm.UserText("start", ms-1), Tag: "prompt"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range s.Tree().Entries() {
		if e.Type != session.TypeMessage || e.Message.Role != llm.RoleUser {
			continue
		}
		if e.Pibot == nil {
			t.Fatalf("entry %q has no pibot fields", e.Message.Text())
		}
		got = append(got, e.Pibot.Msg)
		if e.Pibot.Msg != "prompt" && e.Message.Timestamp != ms {
			t.Errorf("%s has timestamp %d, want %d", e.Pibot.Msg, e.Message.Timestamp, ms)
		}
	}
	if len(got) != 3 || got[0] != "prompt" || got[1] != "first" || got[2] != "second" {
		t.Fatalf("user entries tied to %v, want [prompt first second]", got)
	}
	// Tags left in the queues come back from ClearTagged.
	a.SteerTagged(agent.Tagged{Message: llm.UserText("late", ms), Tag: "late"})
	if st, fu := a.ClearTagged(); len(st) != 1 || st[0].Tag != "late" || len(fu) != 0 {
		t.Fatalf("ClearTagged = %+v, %+v", st, fu)
	}
}

// TestResolve is pi's choice of model and thinking level.
func TestResolve(t *testing.T) {
	inSession := session.Context{Model: &session.ModelRef{Provider: "p", ModelID: "s"}, ThinkingLevel: "high"}
	tests := []struct {
		name            string
		c               session.Context
		override, def   string
		wantRef         string
		wantThinking    llm.ThinkingLevel
		defaultThinking llm.ThinkingLevel
	}{
		{name: "new session", def: "p/d", defaultThinking: "low", wantRef: "p/d", wantThinking: "low"},
		{name: "the session's model and level", c: inSession, def: "p/d", defaultThinking: "low", wantRef: "p/s", wantThinking: "high"},
		{name: "an override wins", c: inSession, override: "p/o", def: "p/d", wantRef: "p/o", wantThinking: "high"},
		{name: "nothing configured", wantRef: "", wantThinking: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, th := Resolve(tt.c, tt.override, tt.def, tt.defaultThinking)
			if ref != tt.wantRef || th != tt.wantThinking {
				t.Fatalf("Resolve = %q, %q; want %q, %q", ref, th, tt.wantRef, tt.wantThinking)
			}
		})
	}
}

// TestSettle writes model_change and thinking_level_change only for what
// changed.
func TestSettle(t *testing.T) {
	info := llm.ModelInfo{Provider: "p", ID: "m"}
	same := session.Context{Model: &session.ModelRef{Provider: "p", ModelID: "m"}, ThinkingLevel: "low"}
	tests := []struct {
		name     string
		c        session.Context
		thinking llm.ThinkingLevel
		want     []string
	}{
		{name: "unchanged", c: same, thinking: "low"},
		{name: "new thinking level", c: same, thinking: "high", want: []string{session.TypeThinkingLevelChange}},
		{name: "new model", c: session.Context{ThinkingLevel: "low"}, thinking: "low", want: []string{session.TypeModelChange}},
		{name: "both", c: session.Context{}, thinking: "off", want: []string{session.TypeModelChange, session.TypeThinkingLevelChange}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHead{}
			if err := Settle(h, tt.c, info, tt.thinking, session.SyncGrouped); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range h.out {
				got = append(got, w.e.Type)
			}
			if len(got) != len(tt.want) || (len(got) > 0 && (got[0] != tt.want[0] || got[len(got)-1] != tt.want[len(tt.want)-1])) {
				t.Fatalf("wrote %v, want %v", got, tt.want)
			}
		})
	}
}
