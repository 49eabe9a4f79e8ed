package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/compaction"
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
	entries, err := c.rec.sess.Branch(c.rec.leaf)
	if err != nil {
		return nil, nil, err
	}
	prep, err := compaction.Prepare(branchEntries(entries), c.settings)
	if err != nil {
		return nil, nil, err
	}
	res, err := compaction.Compact(ctx, c.model(), prep, instructions, c.thinking)
	if err != nil {
		return nil, nil, err
	}
	details, err := json.Marshal(res.Details)
	if err != nil {
		return nil, nil, fmt.Errorf("encode compaction details: %w", err)
	}
	fromHook := false
	err = c.rec.append(session.Entry{
		Type: session.TypeCompaction, Summary: res.Summary, FirstKeptEntryID: res.FirstKeptEntryID,
		TokensBefore: res.TokensBefore, Details: details, FromHook: &fromHook,
	}, session.SyncAlways)
	if err != nil {
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

// branchEntries converts session entries (root first) to the view
// package compaction works on.
func branchEntries(entries []session.Entry) []compaction.BranchEntry {
	out := make([]compaction.BranchEntry, 0, len(entries))
	for _, e := range entries {
		be := compaction.BranchEntry{ID: e.ID, Type: e.Type}
		if t, err := time.Parse(time.RFC3339Nano, e.Timestamp); err == nil {
			be.Timestamp = t
		}
		ms := be.Timestamp.UnixMilli()
		switch e.Type {
		case session.TypeMessage:
			be.Message = e.Message
		case session.TypeCustomMessage:
			m := llm.Message{Role: llm.RoleCustom, CustomType: e.CustomType, Display: e.Display, Details: e.Details, Timestamp: ms}
			var s string
			if json.Unmarshal(e.Content, &s) == nil {
				m.Content, m.StringContent = []llm.Content{llm.TextBlock(s)}, true
			} else {
				_ = json.Unmarshal(e.Content, &m.Content) // undecodable content is summarized as empty
			}
			be.Message = &m
		case session.TypeBranchSummary:
			if e.Summary != "" {
				be.Message = &llm.Message{Role: llm.RoleBranchSummary, Summary: e.Summary, FromID: e.FromID, Timestamp: ms}
			}
			if e.FromHook == nil || !*e.FromHook {
				be.FileOps = fileDetails(e.Details)
			}
		case session.TypeCompaction:
			be.Compaction = &compaction.CompactionData{
				Summary: e.Summary, FirstKeptEntryID: e.FirstKeptEntryID, TokensBefore: e.TokensBefore,
				Details: fileDetails(e.Details), FromHook: e.FromHook != nil && *e.FromHook,
			}
		}
		out = append(out, be)
	}
	return out
}

func fileDetails(raw json.RawMessage) *compaction.FileDetails {
	if len(raw) == 0 {
		return nil
	}
	var d compaction.FileDetails
	if json.Unmarshal(raw, &d) != nil {
		return nil
	}
	return &d
}
