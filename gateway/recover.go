package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// runJournal is runs.json: the replies being streamed right now, so that a
// restart after a crash can mark them interrupted.
type runJournal struct {
	mu   sync.Mutex
	path string
}

type journalEntry struct {
	Path string        `json:"path"`
	Loc  string        `json:"loc"`
	Conv chat.ConvRef  `json:"conv"`
	Refs []chat.MsgRef `json:"refs,omitempty"`
	// Noted: the reply already says it was interrupted (a drained run).
	Noted bool `json:"noted,omitempty"`
}

func (j *runJournal) load() map[string]journalEntry {
	m := map[string]journalEntry{}
	if b, err := os.ReadFile(j.path); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

func (j *runJournal) update(f func(map[string]journalEntry)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.load()
	f(m)
	b, _ := json.Marshal(m)
	tmp := j.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		_ = os.Rename(tmp, j.path)
	}
}

func (j *runJournal) add(path string, loc *location) {
	j.update(func(m map[string]journalEntry) {
		m[path+"|"+loc.key] = journalEntry{Path: path, Loc: loc.key, Conv: loc.conv}
	})
}

func (j *runJournal) setRefs(path string, loc *location, refs []chat.MsgRef) {
	j.update(func(m map[string]journalEntry) {
		m[path+"|"+loc.key] = journalEntry{Path: path, Loc: loc.key, Conv: loc.conv, Refs: refs}
	})
}

// noted records that a drained run marked its own reply.
func (j *runJournal) noted(path string, loc *location, refs []chat.MsgRef) {
	j.update(func(m map[string]journalEntry) {
		m[path+"|"+loc.key] = journalEntry{Path: path, Loc: loc.key, Conv: loc.conv, Refs: refs, Noted: true}
	})
}

func (j *runJournal) remove(path, loc string) {
	j.update(func(m map[string]journalEntry) { delete(m, path+"|"+loc) })
}

const interruptedNote = "⚠️ _This reply was interrupted because pibot restarted._"

// recover marks replies a crash interrupted, resumes their runs when that
// is safe, and replays accepted messages that never reached their session.
func (g *Gateway) recover(ctx context.Context) {
	for _, je := range g.runs.load() {
		g.runs.remove(je.Path, je.Loc)
		ad := g.adapters[je.Conv.Platform]
		for _, ref := range je.Refs {
			if ad == nil || je.Noted {
				break
			}
			if err := ad.Edit(ctx, ref, chat.Out{Markdown: interruptedNote}); err != nil {
				g.log.Warn("mark interrupted reply", "ref", ref.Key(), "err", err)
			}
		}
		o, err := g.owner(ctx, je.Path)
		if err != nil {
			g.log.Warn("recover session", "path", je.Path, "err", err)
			continue
		}
		loc := o.location(je.Loc, je.Conv)
		if o.resumable(loc) {
			g.log.Info("resuming an interrupted run", "loc", je.Loc)
			o.startRun(loc, nil)
		} else if ad != nil && len(je.Refs) == 0 && !je.Noted {
			if _, err := ad.Send(ctx, je.Conv, chat.Out{Markdown: interruptedNote}); err != nil {
				g.log.Warn("notify interrupted", "err", err)
			}
		}
	}
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
		if key := item.In.Msg.Key(); item.In.Msg.ID != "" {
			if path, ok := g.index.get(item.In.Conv.Key()); ok {
				if o, err := g.owner(ctx, path); err == nil {
					if _, done := o.sess.EntryForMsg(key); done {
						_ = g.inbox.Ack(ctx, it.ID)
						continue
					}
				}
			}
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

// Limits for received files.
const (
	maxFileBytes  = 20 << 20
	maxImageBytes = 5 << 20
)

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// receiveFile downloads an inbound file into the workspace's uploads
// directory. It returns a note for the prompt and, for images, a block.
func (g *Gateway) receiveFile(ctx context.Context, conv chat.ConvRef, f chat.FileRef) (string, *llm.Content) {
	dl, ok := g.adapters[conv.Platform].(chat.Downloader)
	if !ok {
		return fmt.Sprintf("[a file %q was attached, but this chat cannot download files]", f.Name), nil
	}
	if f.Size > maxFileBytes {
		return fmt.Sprintf("[file %q is %d MB, larger than the 20 MB limit; not downloaded]", f.Name, f.Size>>20), nil
	}
	name := f.Name
	if name == "" {
		name = f.Kind + "-" + f.ID
	}
	name = fmt.Sprintf("%s-%s", time.Now().UTC().Format("20060102-150405"), unsafeName.ReplaceAllString(filepath.Base(name), "_"))
	dir := filepath.Join(g.workspace(), "uploads")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Sprintf("[file %q could not be saved: %v]", f.Name, err), nil
	}
	var buf bytes.Buffer
	if err := dl.Download(ctx, f, &limitWriter{w: &buf, n: maxFileBytes}); err != nil {
		return fmt.Sprintf("[file %q could not be downloaded: %v]", f.Name, err), nil
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		return fmt.Sprintf("[file %q could not be saved: %v]", f.Name, err), nil
	}
	note := fmt.Sprintf("[file received: uploads/%s (%d bytes)]", name, buf.Len())
	mime := f.MimeType
	if f.Kind == "photo" && mime == "" {
		mime = "image/jpeg"
	}
	if strings.HasPrefix(mime, "image/") && buf.Len() <= maxImageBytes {
		img := llm.ImageBlock(base64.StdEncoding.EncodeToString(buf.Bytes()), mime)
		return note, &img
	}
	return note, nil
}

var errTooLarge = errors.New("file exceeds the size limit")

type limitWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		return 0, errTooLarge
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}
