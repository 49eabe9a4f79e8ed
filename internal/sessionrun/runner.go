package sessionrun

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// Head is the place in a session where a run writes: a gateway location's
// head, or the leaf of a `pibot chat` file.
type Head interface {
	// Leaf is the id of the entry new entries hang under.
	Leaf() string
	// Append writes e as a child of Leaf and makes it the new leaf.
	Append(e session.Entry, sync session.SyncPolicy) (session.Entry, error)
}

// Leaf is a Head that keeps the leaf in memory: one writer on one branch
// (`pibot chat`). It is used from one goroutine.
type Leaf struct {
	sess *session.Session
	leaf string
}

// NewLeaf returns a Head writing to s under leaf.
func NewLeaf(s *session.Session, leaf string) *Leaf { return &Leaf{sess: s, leaf: leaf} }

// Leaf returns the current leaf.
func (l *Leaf) Leaf() string { return l.leaf }

// Append writes e under the leaf and moves the leaf to it.
func (l *Leaf) Append(e session.Entry, sync session.SyncPolicy) (session.Entry, error) {
	e.ParentID = l.leaf
	got, err := l.sess.Append(e, sync)
	if err != nil {
		return session.Entry{}, err
	}
	l.leaf = got.ID
	return got, nil
}

// Runner records an agent's conversation in a session the way pi's
// AgentSession does: every message_end becomes an entry at the head, with
// the durability its role needs. The gateway and `pibot chat` both record
// through it, so a conversation is written the same way wherever it runs.
// Record is called from the goroutine that runs the agent.
type Runner struct {
	head     Head
	meta     func(tag any) *session.Meta
	userHeld bool
}

// Options configure a Runner.
type Options struct {
	// Meta returns the pibot fields of the entry of a user message from
	// the tag it was prompted or queued with (agent.Tagged); nil adds
	// none.
	Meta func(tag any) *session.Meta
	// UserHeld says user messages are held durably elsewhere until the
	// session is flushed (the gateway's inbox, acknowledged with the
	// session's first fsync after the run): they are then group-synced,
	// not synced at once.
	UserHeld bool
}

// NewRunner returns a runner writing at head.
func NewRunner(head Head, o Options) *Runner {
	return &Runner{head: head, meta: o.Meta, userHeld: o.UserHeld}
}

// Recorded is what Record wrote for one message_end.
type Recorded struct {
	// Entry is the appended entry; its ID is empty when the message is
	// not recorded (a role pi does not persist on message_end). Its
	// Message is the event's.
	Entry session.Entry
	// Tag is the tag the message was prompted or queued with.
	Tag any
}

// Record appends the message of a message_end event at the head; other
// events record nothing. An error is a failed write: nothing more can be
// recorded, and the caller stops the run.
func (r *Runner) Record(ev agent.Event) (Recorded, error) {
	if ev.Type != agent.EventMessageEnd || ev.Message == nil {
		return Recorded{}, nil
	}
	rec := Recorded{Tag: ev.Tag}
	err := r.record(&rec, ev.Message)
	return rec, err
}

// record appends the entry of message m for rec. It works through
// pointers: it runs deep in the run goroutine's stack (under the agent
// and the gateway), where every copy of a message on the stack counts.
// The entry takes m itself: the session keeps a copy of its own, and a
// message_end's message is the event's alone.
func (r *Runner) record(rec *Recorded, m *llm.Message) error {
	if !persisted(m.Role) {
		return r.recordOther(rec, m)
	}
	e := session.Entry{Type: session.TypeMessage, Message: m}
	if m.Role == llm.RoleUser && r.meta != nil {
		e.Pibot = r.meta(rec.Tag)
	}
	return r.append(rec, &e, syncFor(m, r.userHeld))
}

// recordOther appends the entry of a message that is not a message
// entry (a custom message), if pi keeps one.
func (r *Runner) recordOther(rec *Recorded, m *llm.Message) error {
	e, ok, err := MessageEntry(*m)
	if err != nil || !ok {
		return err
	}
	return r.append(rec, &e, syncFor(m, r.userHeld))
}

// append appends *e at the head into rec.
func (r *Runner) append(rec *Recorded, e *session.Entry, sync session.SyncPolicy) error {
	got, err := r.head.Append(*e, sync)
	if err != nil {
		return err
	}
	rec.Entry = got
	return nil
}

// persisted reports whether a message of role becomes a message entry
// (see MessageEntry).
func persisted(role llm.Role) bool {
	switch role {
	case llm.RoleUser, llm.RoleAssistant, llm.RoleToolResult, llm.RoleBashExecution:
		return true
	}
	return false
}

// MessageEntry is the session entry of a finished message, following pi:
// user, assistant, toolResult and bashExecution messages become message
// entries, custom messages custom_message entries. ok is false for the
// roles pi never stores from a message_end (branchSummary,
// compactionSummary: they are rebuilt from their own entries).
//
// pi appends bashExecution messages outside message_end (its `!cmd` path),
// but as message entries all the same; recording them here keeps the file
// and the agent's context in step if one reaches a message_end.
func MessageEntry(m llm.Message) (e session.Entry, ok bool, err error) {
	switch {
	case persisted(m.Role):
		return session.Entry{Type: session.TypeMessage, Message: &m}, true, nil
	case m.Role == llm.RoleCustom:
		var content []byte
		if m.StringContent {
			content, err = json.Marshal(m.Text())
		} else {
			content, err = json.Marshal(m.Content)
		}
		if err != nil {
			return session.Entry{}, false, fmt.Errorf("sessionrun: encode custom message: %w", err)
		}
		return session.Entry{Type: session.TypeCustomMessage, CustomType: m.CustomType, Content: content, Display: m.Display, Details: m.Details}, true, nil
	}
	return session.Entry{}, false, nil
}

// SyncFor is the durability a finished message needs:
//   - an assistant message that calls tools is on disk before they run, so
//     a crash resumes from it ("outcome unknown") instead of asking the
//     model again and running the tools twice;
//   - a tool result is on disk at once: the tool's outcome is known for
//     good once recorded;
//   - a user message is on disk at once unless it is held durably
//     elsewhere until the session is flushed (userHeld);
//   - everything else is group-synced.
func SyncFor(m llm.Message, userHeld bool) session.SyncPolicy { return syncFor(&m, userHeld) }

func syncFor(m *llm.Message, userHeld bool) session.SyncPolicy {
	switch m.Role {
	case llm.RoleAssistant:
		if len(m.ToolCalls()) > 0 {
			return session.SyncAlways
		}
	case llm.RoleToolResult:
		return session.SyncAlways
	case llm.RoleUser:
		if !userHeld {
			return session.SyncAlways
		}
	}
	return session.SyncGrouped
}

// Resolve is the model and thinking level a run uses, as pi picks them:
// the model is override (a --model flag, a /model choice) if set, else the
// session's last model_change, else def; the thinking level is the
// session's last thinking_level_change, else defThinking. The caller clamps
// the level to the model it gets (llm.ModelInfo.ClampThinking).
func Resolve(c session.Context, override, def string, defThinking llm.ThinkingLevel) (string, llm.ThinkingLevel) {
	ref := override
	if ref == "" && c.Model != nil {
		ref = c.Model.Provider + "/" + c.Model.ModelID
	}
	if ref == "" {
		ref = def
	}
	thinking := llm.ThinkingLevel(c.ThinkingLevel)
	if thinking == "" {
		thinking = defThinking
	}
	return ref, thinking
}

// Settle records the model and thinking level a run uses when they differ
// from the session's (pi's model_change and thinking_level_change on
// setModel and setThinkingLevel).
func Settle(head Head, c session.Context, info llm.ModelInfo, thinking llm.ThinkingLevel, sync session.SyncPolicy) error {
	if c.Model == nil || c.Model.Provider != info.Provider || c.Model.ModelID != info.ID {
		if _, err := head.Append(session.Entry{Type: session.TypeModelChange, Provider: info.Provider, ModelID: info.ID}, sync); err != nil {
			return fmt.Errorf("sessionrun: record model: %w", err)
		}
	}
	if c.ThinkingLevel != string(thinking) {
		if _, err := head.Append(session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: string(thinking)}, sync); err != nil {
			return fmt.Errorf("sessionrun: record thinking level: %w", err)
		}
	}
	return nil
}

// Compact summarises the branch ending at head's leaf and records the
// compaction there, synced at once. thinking is clamped to the model.
func Compact(ctx context.Context, s *session.Tree, head Head, model llm.Model, settings compaction.Settings, instructions string, thinking llm.ThinkingLevel) (compaction.Result, error) {
	res, err := Summarize(ctx, s, head.Leaf(), model, settings, instructions, model.Info().ClampThinking(thinking))
	if err != nil {
		return compaction.Result{}, err
	}
	if _, err := head.Append(CompactionEntry(res), session.SyncAlways); err != nil {
		return compaction.Result{}, fmt.Errorf("record compaction: %w", err)
	}
	return res, nil
}

// Messages returns the LLM context at head's leaf.
func Messages(s *session.Tree, head Head) ([]llm.Message, error) {
	c, err := s.Context(head.Leaf())
	if err != nil {
		return nil, err
	}
	return c.LLMMessages()
}

// Maintenance returns pi's compaction rules for a run recorded at head:
// after the run an overflow is compacted and continued once, and a context
// over the threshold is compacted. compact does the compaction (Compact,
// with the caller's model and thinking level) and rebuild returns the
// agent's new messages.
func Maintenance(settings compaction.Settings, compact func(ctx context.Context, instructions string) (compaction.Result, error), rebuild func() ([]llm.Message, error)) *agent.Maintenance {
	return agent.NewMaintenance(settings, func(ctx context.Context, _ string, instructions string) (*compaction.Result, []llm.Message, error) {
		res, err := compact(ctx, instructions)
		if err != nil {
			return nil, nil, err
		}
		msgs, err := rebuild()
		if err != nil {
			return nil, nil, err
		}
		return &res, msgs, nil
	})
}
