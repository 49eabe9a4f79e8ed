package gateway

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// offerHistory hands every adapter that shows history (chat.HistoryUser) a
// chat.History bound to its own platform.
func offerHistory(adapters map[chat.Platform]chat.Adapter, index Index, reg *registry) {
	for p, a := range adapters {
		if u, ok := a.(chat.HistoryUser); ok {
			u.UseHistory(&history{platform: p, index: index, reg: reg})
		}
	}
}

// history rebuilds one platform's conversations from the session files:
// the location index names each location's file, the file its head. It
// only reads: a loaded session through its owner (which has what is not
// flushed yet), any other file opened read-only.
type history struct {
	platform chat.Platform
	index    Index
	reg      *registry
}

var _ chat.History = (*history)(nil)

// titleLen is the longest conversation or thread title, in runes.
const titleLen = 60

// sessionAt returns the session of path and a function that lets it go.
func (h *history) sessionAt(path string) (*session.Session, func(), error) {
	h.reg.mu.Lock()
	o := h.reg.owners[path]
	h.reg.mu.Unlock()
	if o != nil {
		return o.sess, func() {}, nil
	}
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

// branch is what a session file says about one location.
type branch struct {
	entries []session.Entry // from the root to the location's head
	name    string          // the session's name
	path    string          // the session file
}

// branchOf returns the entries from the root to loc's head.
func (h *history) branchOf(ctx context.Context, loc string) (branch, error) {
	path, ok, err := h.index.Get(ctx, loc)
	if err != nil || !ok {
		return branch{}, err
	}
	s, done, err := h.sessionAt(path)
	if err != nil {
		// A file not written yet (a new conversation's first run) or gone.
		h.reg.log.Debug("history: session unreadable", "loc", loc, "path", path, "err", err)
		return branch{}, nil
	}
	defer done()
	head, ok := s.Tree().Head(loc)
	if !ok {
		return branch{path: path}, nil
	}
	entries, err := s.Tree().Branch(head)
	return branch{entries: entries, name: s.Tree().Name(), path: path}, err
}

// knownIDs adds to ids the platform message ids the session file at path
// records for the conversation mainKey (its main line and threads), on
// any branch.
func (h *history) knownIDs(path, mainKey string, ids map[string]bool) {
	s, done, err := h.sessionAt(path)
	if err != nil {
		return
	}
	defer done()
	for _, e := range s.Tree().Entries() {
		if e.Pibot == nil || e.Pibot.Msg == "" {
			continue
		}
		conv, id, ok := strings.Cut(e.Pibot.Msg, "#")
		if ok && (conv == mainKey || strings.HasPrefix(conv, mainKey+":")) {
			ids[id] = true
		}
	}
}

// Conversations lists the platform's main lines, most recent first.
func (h *history) Conversations(ctx context.Context, limit int) ([]chat.ConvSummary, error) {
	keys, err := h.index.KeysWithPrefix(ctx, string(h.platform))
	if err != nil {
		return nil, fmt.Errorf("gateway: history: %w", err)
	}
	// Files are read newest first (by modification time) and only until
	// limit conversations are found: a long past costs nothing.
	type cand struct {
		conv chat.ConvRef
		key  string
		mod  time.Time
	}
	var cands []cand
	for _, key := range keys {
		conv, ok := parseLocKey(h.platform, key)
		if !ok || conv.Thread != "" {
			continue
		}
		path, ok, err := h.index.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("gateway: history: %w", err)
		}
		if !ok {
			continue
		}
		c := cand{conv: conv, key: key}
		if fi, err := os.Stat(path); err == nil {
			c.mod = fi.ModTime()
		}
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b cand) int { return b.mod.Compare(a.mod) })
	var out []chat.ConvSummary
	for _, c := range cands {
		if limit > 0 && len(out) == limit {
			break
		}
		b, err := h.branchOf(ctx, c.key)
		if err != nil {
			return nil, fmt.Errorf("gateway: history: %w", err)
		}
		msgs := transcriptOf(b.entries, "")
		if len(msgs) == 0 {
			continue
		}
		sum := chat.ConvSummary{Conv: c.conv, Title: b.name, Messages: len(msgs), Updated: msgs[len(msgs)-1].Time}
		if sum.Title == "" {
			sum.Title = firstUserText(msgs)
		}
		out = append(out, sum)
	}
	slices.SortFunc(out, func(a, b chat.ConvSummary) int { return b.Updated.Compare(a.Updated) })
	return out, nil
}

// Transcript rebuilds conv's main line and threads.
func (h *history) Transcript(ctx context.Context, conv chat.ConvRef) (chat.Transcript, error) {
	if conv.Platform != h.platform {
		return chat.Transcript{}, fmt.Errorf("gateway: history: %s is not a %s conversation", conv.Key(), h.platform)
	}
	conv.Thread = ""
	mainKey := conv.Key()
	main, err := h.branchOf(ctx, mainKey)
	if err != nil {
		return chat.Transcript{}, fmt.Errorf("gateway: history: %w", err)
	}
	var t chat.Transcript
	t.Messages = transcriptOf(main.entries, "")
	paths := map[string]bool{}
	if main.path != "" {
		paths[main.path] = true
	}
	keys, err := h.index.KeysWithPrefix(ctx, mainKey)
	if err != nil {
		return chat.Transcript{}, fmt.Errorf("gateway: history: %w", err)
	}
	type thread struct {
		info  chat.HistoryThread
		msgs  []chat.HistoryMessage
		start time.Time
	}
	var threads []thread
	for _, key := range keys {
		c, ok := parseLocKey(h.platform, key)
		if !ok || c.Channel != conv.Channel || c.Thread == "" {
			continue
		}
		b, err := h.branchOf(ctx, key)
		if err != nil {
			return chat.Transcript{}, fmt.Errorf("gateway: history: %w", err)
		}
		if b.path != "" {
			paths[b.path] = true
		}
		entries := b.entries
		// The thread's own entries start at the first one written for it
		// (its first head, or its first message); the entry before is the
		// message it hangs off.
		i := slices.IndexFunc(entries, func(e session.Entry) bool { return e.Pibot != nil && e.Pibot.Loc == key })
		if i < 0 {
			continue
		}
		th := thread{info: chat.HistoryThread{ID: c.Thread}}
		if i > 0 && entries[i-1].Pibot != nil {
			th.info.Root, th.info.RootThread = splitMsgKey(entries[i-1].Pibot.Msg, mainKey)
		}
		th.msgs = transcriptOf(entries[i:], c.Thread)
		th.info.Title = firstUserText(th.msgs)
		if len(th.msgs) > 0 {
			th.start = th.msgs[0].Time
		}
		threads = append(threads, th)
	}
	slices.SortStableFunc(threads, func(a, b thread) int { return a.start.Compare(b.start) })
	for _, th := range threads {
		t.Threads = append(t.Threads, th.info)
		t.Messages = append(t.Messages, th.msgs...)
	}
	// What the files record off these branches (left by a branch move).
	known := map[string]bool{}
	for p := range paths {
		h.knownIDs(p, mainKey, known)
	}
	for _, m := range t.Messages {
		delete(known, m.ID)
	}
	for id := range known {
		t.Elsewhere = append(t.Elsewhere, id)
	}
	slices.Sort(t.Elsewhere)
	return t, nil
}

// transcriptOf turns a branch into chat messages: each user message, and
// for each run the texts of its assistant messages (an error as a warning),
// carrying the id of the delivered reply when one is recorded.
func transcriptOf(entries []session.Entry, thread string) []chat.HistoryMessage {
	var out []chat.HistoryMessage
	var reply *chat.HistoryMessage
	flush := func() {
		if reply != nil && reply.Text != "" {
			out = append(out, *reply)
		}
		reply = nil
	}
	for _, e := range entries {
		switch {
		case e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleUser:
			flush()
			m := chat.HistoryMessage{Thread: thread, Text: e.Message.Text(), Time: entryTime(e)}
			if e.Pibot != nil {
				m.ID, _ = splitMsgKey(e.Pibot.Msg, "")
			}
			out = append(out, m)
		case e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleAssistant:
			if reply == nil {
				reply = &chat.HistoryMessage{Thread: thread, FromBot: true}
			}
			text := strings.TrimSpace(e.Message.Text())
			if e.Message.StopReason == llm.StopError && e.Message.ErrorMessage != "" {
				text = "⚠️ " + e.Message.ErrorMessage
			}
			if text != "" {
				if reply.Text != "" {
					reply.Text += "\n\n"
				}
				reply.Text += text
				reply.Time = entryTime(e)
			}
		case e.Type == session.TypeCustom && e.CustomType == customDelivery && reply != nil && e.Pibot != nil:
			reply.ID, _ = splitMsgKey(e.Pibot.Msg, "")
		}
	}
	flush()
	return out
}

// splitMsgKey splits a message key (chat.MsgRef.Key) into the message id
// and, when the key is of a thread of the conversation mainKey, that
// thread's id.
func splitMsgKey(key, mainKey string) (id, thread string) {
	i := strings.LastIndexByte(key, '#')
	if i < 0 {
		return "", ""
	}
	if mainKey != "" {
		thread, _ = strings.CutPrefix(key[:i], mainKey+":")
		if thread == key[:i] {
			thread = ""
		}
	}
	return key[i+1:], thread
}

// parseLocKey parses a location key of platform ("platform:workspace:
// channel[:thread]", chat.ConvRef.Key) back into its ConvRef.
func parseLocKey(platform chat.Platform, key string) (chat.ConvRef, bool) {
	rest, ok := strings.CutPrefix(key, string(platform)+":")
	if !ok {
		return chat.ConvRef{}, false
	}
	parts := strings.Split(rest, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[1] == "" {
		return chat.ConvRef{}, false
	}
	c := chat.ConvRef{Platform: platform, Workspace: parts[0], Channel: parts[1]}
	if len(parts) == 3 {
		c.Thread = parts[2]
	}
	return c, true
}

func entryTime(e session.Entry) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, e.Timestamp)
	return t
}

// firstUserText is the first user message of msgs, shortened to a title.
func firstUserText(msgs []chat.HistoryMessage) string {
	for _, m := range msgs {
		if !m.FromBot {
			return shorten(m.Text)
		}
	}
	return ""
}

func shorten(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > titleLen {
		return strings.TrimSpace(string(r[:titleLen-1])) + "…"
	}
	return cmp.Or(s, "(empty)")
}
