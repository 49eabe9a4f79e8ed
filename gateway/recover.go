package gateway

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/atomicfile"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// runJournal is runs.json: the chat messages of replies being streamed
// right now, so that after a crash the next start can mark them
// interrupted. It lives in memory; one goroutine (flush) writes coalesced
// snapshots, fsynced, off the path of any message.
type runJournal struct {
	path  string
	mu    sync.Mutex
	m     map[string]journalEntry
	dirty chan struct{}
}

type journalEntry struct {
	Path string        `json:"path"`
	Loc  string        `json:"loc"`
	Conv chat.ConvRef  `json:"conv"`
	Refs []chat.MsgRef `json:"refs,omitempty"`
	// Noted: the reply already says it was interrupted (a drained run).
	Noted bool `json:"noted,omitempty"`
}

func newRunJournal(path string) *runJournal {
	return &runJournal{path: path, m: map[string]journalEntry{}, dirty: make(chan struct{}, 1)}
}

// previous returns what the last process left in the file.
func (j *runJournal) previous() map[string]journalEntry {
	m := map[string]journalEntry{}
	if b, err := os.ReadFile(j.path); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

func (j *runJournal) set(e journalEntry) {
	j.mu.Lock()
	j.m[e.Path+"|"+e.Loc] = e
	j.mu.Unlock()
	j.touch()
}

func (j *runJournal) setRefs(path string, loc *location, refs []chat.MsgRef) {
	j.set(journalEntry{Path: path, Loc: loc.key, Conv: loc.conv, Refs: refs})
}

// noted records that a drained run marked its own reply.
func (j *runJournal) noted(path string, loc *location, refs []chat.MsgRef) {
	j.set(journalEntry{Path: path, Loc: loc.key, Conv: loc.conv, Refs: refs, Noted: true})
}

func (j *runJournal) remove(path, loc string) {
	j.mu.Lock()
	_, ok := j.m[path+"|"+loc]
	delete(j.m, path+"|"+loc)
	j.mu.Unlock()
	if ok {
		j.touch()
	}
}

func (j *runJournal) touch() {
	select {
	case j.dirty <- struct{}{}:
	default:
	}
}

// journalInterval is the least time between two snapshots: changes in
// between are written together.
const journalInterval = 100 * time.Millisecond

// flush writes snapshots until stop is closed, then writes the last one.
func (j *runJournal) flush(stop <-chan struct{}, log interface{ Warn(string, ...any) }) {
	for {
		select {
		case <-j.dirty:
		case <-stop:
			if err := j.write(); err != nil {
				log.Warn("write runs.json", "err", err)
			}
			return
		}
		if err := j.write(); err != nil {
			log.Warn("write runs.json", "err", err)
		}
		select {
		case <-time.After(journalInterval):
		case <-stop:
			if err := j.write(); err != nil {
				log.Warn("write runs.json", "err", err)
			}
			return
		}
	}
}

func (j *runJournal) write() error {
	j.mu.Lock()
	b, err := json.Marshal(j.m)
	j.mu.Unlock()
	if err != nil {
		return err
	}
	return atomicfile.Write(j.path, b)
}

const interruptedNote = "⚠️ _This reply was interrupted because pibot restarted._"

// recover marks replies a crash interrupted and replays the inbox: every
// accepted message whose run did not finish. A message not yet in its
// session is delivered again; one already there resumes its run when that
// is safe (see resumable).
func (g *Gateway) recover(ctx context.Context) {
	for _, je := range g.runs.previous() {
		ad := g.adapters[je.Conv.Platform]
		for _, ref := range je.Refs {
			if ad == nil || je.Noted {
				break
			}
			if err := ad.Edit(ctx, ref, chat.Out{Markdown: interruptedNote}); err != nil {
				g.log.Warn("mark interrupted reply", "ref", ref.Key(), "err", err)
			}
		}
	}
	g.runs.touch() // the file now holds this process's (empty) state
	for _, it := range g.inbox.Pending() {
		var item inboxItem
		if err := json.Unmarshal(it.Data, &item); err != nil {
			g.log.Error("inbox item unreadable; dropping", "id", it.ID, "err", err)
			_ = g.inbox.Ack(ctx, it.ID)
			continue
		}
		if item.In.DedupKey != "" {
			// A platform redelivery of this event is a duplicate.
			_, _ = g.dedupe.Seen(ctx, item.In.DedupKey)
		}
		g.log.Info("replaying an accepted message", "conv", item.In.Conv.Key())
		g.deliver(ctx, it.ID, item)
	}
}

// unknownOutcome is the result recorded for a tool call that was running
// when pibot stopped: it is never run again blindly.
const unknownOutcome = "pibot restarted while this tool was running; its outcome is unknown. Check the state before running it again."

// resumable reports whether loc's interrupted run can continue without
// side effects, preparing it: an unanswered user message is answered
// again; tool calls that were running get an "outcome unknown" result and
// the model continues. Calls still waiting for approval wait on.
func (o *owner) resumable(loc *location) bool {
	branch, err := o.sess.Branch(o.head(loc))
	if err != nil {
		return false
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
		return false
	}
	if last.Role == llm.RoleUser {
		return true
	}
	var call *llm.Message
	for i := len(branch) - 1; i >= 0; i-- {
		if m := branch[i].Message; m != nil && m.Role == llm.RoleAssistant {
			call = m
			break
		}
	}
	if call == nil || call.StopReason != llm.StopToolUse {
		return false
	}
	calls := call.ToolCalls()
	for _, c := range calls {
		if results[c.ID] {
			continue
		}
		if pendingApproval[c.ID] {
			return false
		}
		msg := llm.Message{Role: llm.RoleToolResult, ToolCallID: c.ID, ToolName: c.Name, Content: []llm.Content{llm.TextBlock(unknownOutcome)}, IsError: true, Timestamp: time.Now().UnixMilli()}
		if _, err := o.append(loc, session.Entry{Type: session.TypeMessage, Message: &msg}, session.SyncAlways); err != nil {
			o.g.log.Warn("record unknown tool outcome", "err", err)
			return false
		}
	}
	return len(calls) > 0
}
