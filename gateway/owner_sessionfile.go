package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/internal/sessionrun"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// sessionFile is a loaded session file as its one writer sees it: the
// lease, the head of every location, appends and head moves (serialised
// by mu), and a location's context. What the branch at a location's head
// says is read through a locView (owner_view.go), the session's agent is
// its fileAgent. Its owner embeds it and shares mu.
type sessionFile struct {
	env   fileEnv
	path  string
	sess  *session.Session
	lease cluster.Lease
	fileAgent

	mu       sync.Mutex
	heads    map[string]string
	lastUsed time.Time
	closed   bool
}

// fileAgent is a session file's agent (agents.go): set when the owner is
// built, and by newSession for the agent it chose; until then the default
// agent's settings, from the gateway's Config.
type fileAgent struct {
	cfg *Config // the gateway's, read-only
	cur atomic.Pointer[sessionAgent]
}

// sessionAgent is a session's agent, its name and why it was chosen.
type sessionAgent struct {
	rec agentRecord
	a   *Agent
}

// setAgent makes rec's agent a the session's.
func (f *fileAgent) setAgent(rec agentRecord, a *Agent) {
	f.cur.Store(&sessionAgent{rec: rec, a: a})
}

// agentRec is the session's agent's name and why it was chosen.
func (f *fileAgent) agentRec() agentRecord {
	if s := f.cur.Load(); s != nil {
		return s.rec
	}
	return agentRecord{Name: DefaultAgent}
}

// agentConfig returns the session's agent (the default agent's settings,
// from the gateway's Config, before one is set).
func (f *fileAgent) agentConfig() *Agent {
	if s := f.cur.Load(); s != nil {
		return s.a
	}
	c := f.cfg
	return &Agent{Model: c.Model, Thinking: c.Thinking, SystemPrompt: c.SystemPrompt, Workspace: absWorkspace(c.Workspace), Tools: c.Tools,
		QueueMode: c.QueueMode, Extensions: c.Extensions, Worktrees: c.Worktrees, WorktreePruneAfter: c.WorktreePruneAfter}
}

// fileEnv are the collaborators of a sessionFile.
type fileEnv struct {
	log   *slog.Logger
	index Index
	// failed is told of a failed write (health.storageFailed).
	failed func(err error)
	// changed is told that the file changed under the session's index
	// (session.ErrFileChanged): the owner is unloaded, so the next
	// message loads the file anew.
	changed func()
}

func (f *sessionFile) touch() {
	f.mu.Lock()
	f.lastUsed = time.Now()
	f.mu.Unlock()
}

func (f *sessionFile) head(loc *location) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headLocked(loc.key)
}

// headModel returns loc's head and the model /model chose there ("" for
// the session's), read together under the lock: a /model command sets
// the model while a run reads its context.
func (f *sessionFile) headModel(loc *location) (head, model string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headLocked(loc.key), loc.model
}

func (f *sessionFile) headLocked(key string) string {
	if h, ok := f.heads[key]; ok {
		return h
	}
	return f.sess.Tree().Leaf()
}

// append writes e as the new head of loc. With SyncAlways it returns once
// e is durable; the file is not locked while the disk works.
func (f *sessionFile) append(loc *location, e session.Entry, sync session.SyncPolicy) (session.Entry, error) {
	out, err := f.appendEntry(loc, e)
	if err = f.settle(err, sync); err != nil {
		return session.Entry{}, fmt.Errorf("gateway: append: %w", err)
	}
	return out, nil
}

// settle flushes (SyncAlways) or writes (SyncWritten) the session after a
// successful change when sync asks for it, outside the owner's lock. The location index is synced with it:
// an entry on disk never names a location whose binding is not.
func (f *sessionFile) settle(err error, sync session.SyncPolicy) error {
	switch {
	case err != nil:
	case sync == session.SyncAlways:
		err = errors.Join(f.sess.Flush(), f.env.index.Sync(context.Background()))
	case sync == session.SyncWritten:
		// In the file before a crash of pibot can take it; the binding
		// that names the file is made durable with it.
		err = errors.Join(f.sess.Write(), f.env.index.Sync(context.Background()))
	}
	if err != nil {
		f.env.failed(err)
	}
	return err
}

// appendEntry appends e at loc's head under the lock, with the group
// commit (append settles it).
func (f *sessionFile) appendEntry(loc *location, e session.Entry) (session.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return session.Entry{}, errors.New("gateway: session closed")
	}
	e.ParentID = f.headLocked(loc.key)
	if e.Pibot == nil {
		e.Pibot = &session.Meta{}
	}
	e.Pibot.Loc = loc.key
	out, err := f.sess.Append(e, session.SyncGrouped)
	if err != nil {
		return session.Entry{}, err
	}
	f.heads[loc.key] = out.ID
	f.lastUsed = time.Now()
	return out, nil
}

// moveHead makes target the head of loc (a branch). With SyncAlways it
// returns once the move is durable; a move for an inbound message is
// grouped (the inbox holds the message until its run is flushed).
func (f *sessionFile) moveHead(loc *location, target string, sync session.SyncPolicy) error {
	if err := f.settle(f.setHead(loc, target), sync); err != nil {
		return fmt.Errorf("gateway: move head: %w", err)
	}
	return nil
}

// setHead moves loc's head to target under the lock, with the group
// commit (moveHead settles it).
func (f *sessionFile) setHead(loc *location, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.headLocked(loc.key) == target {
		return nil
	}
	if err := f.sess.MoveHead(loc.key, target, session.SyncGrouped); err != nil {
		return err
	}
	if h, ok := f.sess.Tree().Head(loc.key); ok {
		f.heads[loc.key] = h
	}
	return nil
}

// branchPoint is the entry of tree a new branch from message ref starts
// at: for a reply to the bot, the reply's entry; for one of the user's own
// messages, that message's parent (the question is asked again
// differently).
func branchPoint(tree *session.Tree, ref chat.MsgRef) (string, bool) {
	id, ok := tree.EntryForMsg(ref.Key())
	if !ok {
		return "", false
	}
	e, ok := tree.Get(id)
	if !ok {
		return "", false
	}
	if e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleUser && e.ParentID != "" {
		return e.ParentID, true
	}
	return id, true
}

// savedModeLocked is the queue mode last set with /queue on the branch of
// location key, or the default.
func (f *sessionFile) savedModeLocked(key string) string {
	head, ok := f.heads[key]
	if !ok {
		return f.agentConfig().QueueMode
	}
	// Walked from the head without decoding a message: the setting is
	// in a custom entry, and a long branch's messages are most of it.
	for e := range f.sess.Tree().BranchBack(head) {
		if e.Type == session.TypeCustom && e.CustomType == customQueue {
			var d struct{ Mode string }
			if json.Unmarshal(e.Data, &d) == nil && d.Mode != "" {
				return d.Mode
			}
		}
	}
	return f.agentConfig().QueueMode
}

// contextFor returns the messages, thinking level and model of loc's head.
func (f *sessionFile) contextFor(loc *location) ([]llm.Message, llm.ThinkingLevel, string, error) {
	head, model := f.headModel(loc)
	c, err := f.sess.Tree().Context(head)
	var msgs []llm.Message
	if err == nil {
		msgs, err = c.LLMMessages()
	}
	if err != nil {
		return nil, "", "", f.contextError(loc, err)
	}
	ref, thinking := sessionrun.Resolve(c, model, f.agentConfig().Model, f.agentConfig().Thinking)
	return msgs, thinking, ref, nil
}

// branchContext is contextFor for the run at loc, from loc's BranchCache: a
// head that only grew since the last run's costs the new entries, not the
// whole history. The messages are shared with the cache (the agent adopts
// them: see agent.Adopt).
func (f *sessionFile) branchContext(loc *location) ([]llm.Message, llm.ThinkingLevel, string, error) {
	head, model := f.headModel(loc)
	c, err := loc.branch.Context(f.sess.Tree(), head)
	if err != nil {
		return nil, "", "", f.contextError(loc, err)
	}
	ref, thinking := sessionrun.Resolve(session.Context{ThinkingLevel: c.ThinkingLevel, Model: c.Model}, model, f.agentConfig().Model, f.agentConfig().Thinking)
	return c.Messages, thinking, ref, nil
}

// contextError logs why loc's context could not be read and returns what
// the chat is told. The error names server paths: the log gets it, the
// chat does not.
func (f *sessionFile) contextError(loc *location, err error) error {
	f.env.log.Error("read session context", "path", f.path, "loc", loc.key, "err", err)
	if errors.Is(err, session.ErrFileChanged) && f.env.changed != nil {
		// Not a line more into a file its index no longer describes.
		f.sess.SetFenced(err)
		f.env.changed()
	}
	return errors.New("⚠️ I cannot read this conversation's session; the details are in pibot's log")
}

// resumable reports whether loc's interrupted run can continue without
// side effects, preparing it: an unanswered user message is answered
// again; tool calls that were running get an "outcome unknown" result and
// the model continues. Calls still waiting for approval wait on. unknown
// names the tools whose outcome it recorded as unknown.
func (f *sessionFile) resumable(loc *location) (ok bool, unknown []string) {
	branch, err := f.sess.Tree().Branch(f.head(loc))
	if err != nil {
		return false, nil
	}
	results := map[string]bool{}
	pendingApproval := map[string]bool{}
	var last *llm.Message
	for _, e := range branch {
		switch {
		case e.Type == session.TypeMessage && e.Message != nil:
			last = e.Message
			if e.Message.Role == llm.RoleToolResult {
				results[e.Message.ToolCallID] = true
			}
		case e.Type == session.TypeCustom && e.CustomType == customApproval:
			var a approval
			if json.Unmarshal(e.Data, &a) == nil {
				pendingApproval[a.ToolCall] = a.State == "pending"
			}
		}
	}
	if last == nil {
		return false, nil
	}
	if last.Role == llm.RoleUser {
		return true, nil
	}
	var call *llm.Message
	for i := len(branch) - 1; i >= 0; i-- {
		if m := branch[i].Message; m != nil && m.Role == llm.RoleAssistant {
			call = m
			break
		}
	}
	if call == nil || call.StopReason != llm.StopToolUse {
		return false, nil
	}
	calls := call.ToolCalls()
	for _, c := range calls {
		if results[c.ID] {
			continue
		}
		if pendingApproval[c.ID] {
			return false, nil
		}
		msg := llm.Message{Role: llm.RoleToolResult, ToolCallID: c.ID, ToolName: c.Name, Content: []llm.Content{llm.TextBlock(unknownOutcome)}, IsError: true, Timestamp: time.Now().UnixMilli()}
		if _, err := f.append(loc, session.Entry{Type: session.TypeMessage, Message: &msg}, session.SyncAlways); err != nil {
			f.env.log.Warn("record unknown tool outcome", "err", err)
			return false, nil
		}
		unknown = append(unknown, c.Name)
	}
	return len(calls) > 0, unknown
}

// answerStored reports whether the branch of tree at head ends, custom
// entries aside, with a final answer of the model (an assistant message
// that calls no tools): the last run there answered, whether or not its
// reply reached the chat.
func answerStored(tree *session.Tree, head string) bool {
	for e := range tree.BranchBack(head) {
		if e.Type != session.TypeMessage {
			continue
		}
		// Only the last message is decoded.
		if full, ok := tree.Get(e.ID); ok && full.Message != nil {
			m := full.Message
			return m.Role == llm.RoleAssistant && m.StopReason != llm.StopToolUse
		}
	}
	return false
}
