package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/internal/sessionview"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// recorder writes a CLI conversation to its session file like pi's
// AgentSession: every message_end becomes an entry under the current leaf.
// It is used from the goroutine that runs the agent.
type recorder struct {
	sess *session.Session
	leaf string
	// err is the first write failure; the run is aborted when it happens.
	err error
}

// append writes e as a child of the leaf and moves the leaf to it.
func (r *recorder) append(e session.Entry, sync session.SyncPolicy) error {
	e.ParentID = r.leaf
	got, err := r.sess.Append(e, sync)
	if err != nil {
		return err
	}
	r.leaf = got.ID
	return nil
}

// observe persists the message of a message_end event: user messages are
// durable before the run goes on (SyncAlways), the others are group-synced.
func (r *recorder) observe(ev agent.Event) error {
	if ev.Type != agent.EventMessageEnd || ev.Message == nil || r.err != nil {
		return r.err
	}
	m := *ev.Message
	var e session.Entry
	switch m.Role {
	case llm.RoleUser, llm.RoleAssistant, llm.RoleToolResult, llm.RoleBashExecution:
		e = session.Entry{Type: session.TypeMessage, Message: &m}
	case llm.RoleCustom:
		content, err := json.Marshal(m.Content)
		if m.StringContent {
			content, err = json.Marshal(m.Text())
		}
		if err != nil {
			return fmt.Errorf("encode custom message: %w", err)
		}
		e = session.Entry{Type: session.TypeCustomMessage, CustomType: m.CustomType, Content: content, Display: m.Display, Details: m.Details}
	default:
		return nil
	}
	sync := session.SyncGrouped
	if m.Role == llm.RoleUser {
		sync = session.SyncAlways
	}
	if err := r.append(e, sync); err != nil {
		r.err = err
	}
	return r.err
}

// compactor implements agent.CompactFunc for a recorded session.
type compactor struct {
	rec      *recorder
	model    func() llm.Model
	settings compaction.Settings
	thinking llm.ThinkingLevel
}

// compact summarizes the current branch, appends the compaction entry and
// returns the rebuilt context.
func (c *compactor) compact(ctx context.Context, _ string, instructions string) (*compaction.Result, []llm.Message, error) {
	res, err := sessionview.Summarize(ctx, c.rec.sess, c.rec.leaf, c.model(), c.settings, instructions, c.thinking)
	if err != nil {
		return nil, nil, err
	}
	if err := c.rec.append(sessionview.CompactionEntry(res), session.SyncAlways); err != nil {
		return nil, nil, err
	}
	sc, err := c.rec.sess.Context(c.rec.leaf)
	if err != nil {
		return nil, nil, err
	}
	msgs, err := sc.LLMMessages()
	if err != nil {
		return nil, nil, err
	}
	return &res, msgs, nil
}
