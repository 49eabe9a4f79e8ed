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
	r := h.reading()
	defer r.close()
	var out []chat.ConvSummary
	for _, c := range cands {
		if limit > 0 && len(out) == limit {
			break
		}
		b, err := r.branchOf(ctx, c.key)
		if err != nil {
			return nil, fmt.Errorf("gateway: history: %w", err)
		}
		msgs := transcriptOf(b.context, "", c.key)
		if len(msgs) == 0 {
			continue
		}
		sum := chat.ConvSummary{Conv: c.conv, Title: b.name, Messages: len(msgs), Updated: msgs[len(msgs)-1].Time, Agent: b.agent}
		if sum.Title == "" {
			sum.Title = firstUserText(msgs)
		}
		out = append(out, sum)
	}
	slices.SortFunc(out, func(a, b chat.ConvSummary) int { return b.Updated.Compare(a.Updated) })
	return out, nil
}

// Transcript rebuilds conv's main line and threads: each place shows its
// branch as the model's context has it; a thread from the entry after
// the one it hangs off.
func (h *history) Transcript(ctx context.Context, conv chat.ConvRef) (chat.Transcript, error) {
	if conv.Platform != h.platform {
		return chat.Transcript{}, fmt.Errorf("gateway: history: %s is not a %s conversation", conv.Key(), h.platform)
	}
	conv.Thread = ""
	mainKey := conv.Key()
	keys, err := h.index.KeysWithPrefix(ctx, mainKey)
	if err != nil {
		return chat.Transcript{}, fmt.Errorf("gateway: history: %w", err)
	}
	// The places of conv: its main line first, then its threads.
	places := []string{""}
	for _, key := range keys {
		if c, ok := parseLocKey(h.platform, key); ok && c.Channel == conv.Channel && c.Thread != "" {
			places = append(places, c.Thread)
		}
	}
	type shown struct {
		info  chat.HistoryThread
		msgs  []chat.HistoryMessage
		start time.Time
	}
	var views []shown
	r := h.reading()
	defer r.close()
	files := map[string]*placeFacts{}
	// ids shows, per place, the message ids its view holds.
	ids := map[string]map[string]bool{}
	for _, thread := range places {
		key := mainKey
		if thread != "" {
			key += ":" + thread
		}
		b, err := r.branchOf(ctx, key)
		if err != nil {
			return chat.Transcript{}, fmt.Errorf("gateway: history: %w", err)
		}
		if b.path == "" {
			continue
		}
		facts := files[b.path]
		if facts == nil {
			facts = r.facts(b.path, mainKey)
			files[b.path] = facts
		}
		entries := b.context
		v := shown{info: chat.HistoryThread{ID: thread}}
		if thread != "" {
			// A thread shows what follows the entry it hangs off (the
			// parent of the first entry written for it), when that is in
			// its context; otherwise all of its context.
			first, ok := facts.first[key]
			if !ok {
				continue
			}
			if i := slices.IndexFunc(entries, func(e session.Entry) bool { return e.ID == first.ParentID }); i >= 0 {
				if m := entries[i].Pibot; m != nil {
					v.info.Root, v.info.RootThread, _ = msgPlace(m.Msg, mainKey)
				}
				entries = entries[i+1:]
			}
		}
		v.msgs = transcriptOf(entries, thread, mainKey)
		ids[thread] = map[string]bool{}
		for _, m := range v.msgs {
			if m.ID != "" {
				ids[thread][m.ID] = true
			}
		}
		if thread != "" {
			v.info.Title = firstUserText(v.msgs)
			if len(v.msgs) > 0 {
				v.start = v.msgs[0].Time
			}
		}
		views = append(views, v)
	}
	var t chat.Transcript
	if len(views) > 0 && views[0].info.ID == "" {
		t.Messages = views[0].msgs
		views = views[1:]
	}
	slices.SortStableFunc(views, func(a, b shown) int { return a.start.Compare(b.start) })
	for _, v := range views {
		t.Threads = append(t.Threads, v.info)
		t.Messages = append(t.Messages, v.msgs...)
	}
	// What the files record of conv that the place it was posted in no
	// longer shows (a branch move left it, or a compaction summarised it).
	for _, facts := range files {
		for id, thread := range facts.posted {
			if !ids[thread][id] {
				t.Elsewhere = append(t.Elsewhere, id)
			}
		}
	}
	slices.Sort(t.Elsewhere)
	t.Elsewhere = slices.Compact(t.Elsewhere)
	return t, nil
}

// placeFacts is what one session file records about the places of a
// conversation, on any branch.
type placeFacts struct {
	// first is the first entry written for each place (by location key).
	first map[string]session.Entry
	// posted maps the id of each platform message of the conversation
	// the file records to the thread it was posted in ("" the main line).
	posted map[string]string
}

// facts reads the placeFacts of the conversation mainKey from the
// session file at path: from its entries' envelopes (pibot fields, ids),
// reading none of its messages.
func (r *reading) facts(path, mainKey string) *placeFacts {
	f := &placeFacts{first: map[string]session.Entry{}, posted: map[string]string{}}
	tree, err := r.at(path)
	if err != nil {
		return f
	}
	for e := range tree.Envelopes() {
		if e.Pibot == nil {
			continue
		}
		if loc := e.Pibot.Loc; loc == mainKey || strings.HasPrefix(loc, mainKey+":") {
			if _, ok := f.first[loc]; !ok {
				f.first[loc] = e
			}
		}
		if id, thread, ok := msgPlace(e.Pibot.Msg, mainKey); ok {
			f.posted[id] = thread
		}
	}
	return f
}

// contextEntries returns the entries of branch (root first) that the
// model's context is built from, in its order, as pi's
// buildSessionContext picks them: after a compaction, the compaction
// entry (standing for its summary), then the entries it kept, then those
// after it.
func contextEntries(branch []session.Entry) []session.Entry {
	last := -1
	for i, e := range branch {
		if e.Type == session.TypeCompaction {
			last = i
		}
	}
	if last < 0 {
		return branch
	}
	comp := branch[last]
	// pi finds the compaction by id; with duplicate ids the first wins.
	at := slices.IndexFunc(branch, func(e session.Entry) bool { return e.Type == session.TypeCompaction && e.ID == comp.ID })
	out := []session.Entry{comp}
	kept := false
	for _, e := range branch[:at] {
		kept = kept || e.ID == comp.FirstKeptEntryID
		if kept {
			out = append(out, e)
		}
	}
	return append(out, branch[at+1:]...)
}

// transcriptOf turns the context entries of one place (thread) into chat
// messages: each user message, and for each run the texts of its
// assistant messages (an error as a warning), carrying the id of the
// delivered reply when one is recorded; a compaction's or another
// branch's summary and a displayed custom message as notes. Ids of
// messages not of the conversation mainKey are left out.
func transcriptOf(entries []session.Entry, thread, mainKey string) []chat.HistoryMessage {
	var out []chat.HistoryMessage
	var reply *chat.HistoryMessage
	flush := func() {
		if reply != nil && reply.Text != "" {
			out = append(out, *reply)
		}
		reply = nil
	}
	place := func(m *chat.HistoryMessage, e session.Entry) {
		if e.Pibot == nil {
			return
		}
		if id, origin, ok := msgPlace(e.Pibot.Msg, mainKey); ok {
			m.ID, m.Origin, m.Moved = id, origin, origin != thread
		}
	}
	note := func(e session.Entry, text string) {
		flush()
		out = append(out, chat.HistoryMessage{Thread: thread, FromBot: true, Note: true, Text: text, Time: entryTime(e)})
	}
	for _, e := range entries {
		m := e.Message
		switch {
		case e.Type == session.TypeMessage && m != nil && m.Role == llm.RoleUser:
			flush()
			u := chat.HistoryMessage{Thread: thread, Text: m.Text(), Time: entryTime(e)}
			place(&u, e)
			out = append(out, u)
		case e.Type == session.TypeMessage && m != nil && m.Role == llm.RoleAssistant:
			if reply == nil {
				reply = &chat.HistoryMessage{Thread: thread, FromBot: true}
			}
			text := strings.TrimSpace(m.Text())
			if m.StopReason == llm.StopError && m.ErrorMessage != "" {
				text = "⚠️ " + m.ErrorMessage
			}
			if text != "" {
				if reply.Text != "" {
					reply.Text += "\n\n"
				}
				reply.Text += text
				reply.Time = entryTime(e)
			}
		case e.Type == session.TypeCustom && e.CustomType == customDelivery && reply != nil:
			place(reply, e)
		case e.Type == session.TypeCompaction:
			note(e, "📝 *Earlier messages were compacted. The model sees this summary of them:*\n\n"+e.Summary)
		case e.Type == session.TypeBranchSummary && strings.TrimSpace(e.Summary) != "":
			note(e, "📝 *Summary of another branch:*\n\n"+e.Summary)
		case e.Type == session.TypeCustomMessage && m != nil && m.Display && strings.TrimSpace(m.Text()) != "":
			note(e, m.Text())
		}
	}
	flush()
	return out
}

// msgPlace splits a message key (chat.MsgRef.Key) of the conversation
// mainKey into the message id and the thread it was posted in ("" the
// main line); ok is false for a key of another conversation.
func msgPlace(key, mainKey string) (id, thread string, ok bool) {
	i := strings.LastIndexByte(key, '#')
	if i < 0 || i == len(key)-1 {
		return "", "", false
	}
	conv := key[:i]
	if conv != mainKey {
		var cut bool
		if thread, cut = strings.CutPrefix(conv, mainKey+":"); !cut || thread == "" {
			return "", "", false
		}
	}
	return key[i+1:], thread, true
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
