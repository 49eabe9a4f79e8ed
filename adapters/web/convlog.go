package web

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
)

// Bounds of the in-memory state.
const (
	// maxMessages is how many messages a conversation log keeps.
	maxMessages = 500
	// maxEntries bounds a conversation log's entries (messages, their
	// latest edits, status lines, the latest toast).
	maxEntries = 2*maxMessages + 100
	// maxConvs is how many idle conversations are kept.
	maxConvs = 64
)

// Who wrote a message.
const (
	fromUser = "user"
	fromBot  = "bot"
)

// message is the state of one chat message, sent to browsers as JSON.
type message struct {
	Type    string         `json:"type"` // always "msg"
	ID      string         `json:"id"`
	Thread  string         `json:"thread"`
	From    string         `json:"from"`
	Text    string         `json:"text"`
	Buttons [][]wireButton `json:"buttons,omitempty"`
	ReplyTo *wireRef       `json:"replyTo,omitempty"`
	// Error is set when the gateway refused a user message.
	Error string    `json:"error,omitempty"`
	Time  time.Time `json:"time"`
	// Origin is set on a rebuilt message shown in another place than the
	// one it was posted in (a /tree jump put it on this place's branch):
	// that place's thread, "" for the main line. A reply to it names it.
	Origin *string `json:"origin,omitempty"`
	// Note marks a rebuilt note (a compaction's summary), no message.
	Note bool `json:"note,omitempty"`
}

type wireButton struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Style string `json:"style,omitempty"`
}

// wireRef points at a message of the same conversation.
type wireRef struct {
	ID     string `json:"id"`
	Thread string `json:"thread"`
}

// notice is a status line or a toast, sent to browsers as JSON.
type notice struct {
	Type   string `json:"type"` // "status" or "toast"
	Thread string `json:"thread"`
	Text   string `json:"text"`
	// Since is when a status line last changed its text: the browser
	// shows how long the agent has been at it ("running bash · 5 s").
	Since *time.Time `json:"since,omitempty"`
}

// statusLine is the current status line of a thread.
type statusLine struct {
	text  string
	since time.Time
}

func wireButtons(rows [][]chat.Button) [][]wireButton {
	var out [][]wireButton
	for _, row := range rows {
		if len(row) == 0 {
			continue
		}
		r := make([]wireButton, len(row))
		for i, b := range row {
			r[i] = wireButton{ID: b.ID, Label: b.Label}
			switch b.Style {
			case chat.StylePrimary:
				r[i].Style = "primary"
			case chat.StyleDanger:
				r[i].Style = "danger"
			}
		}
		out = append(out, r)
	}
	return out
}

func equalButtons(a, b [][]wireButton) bool {
	return slices.EqualFunc(a, b, slices.Equal)
}

func wireRefOf(ref *chat.MsgRef) *wireRef {
	if ref == nil || ref.Conv.Platform != Platform {
		return nil
	}
	return &wireRef{ID: ref.ID, Thread: ref.Conv.Thread}
}

// entry is one event of a conversation log. A message's creation entry
// stays in place and always carries the message's current state; its
// latest edit is one more entry, moved to the end on every edit, so that a
// browser which saw the creation still learns about the edit.
type entry struct {
	seq uint64
	// key identifies replaceable entries: "u:<id>" (latest edit),
	// "s:<thread>" (status line), "t" (latest toast); "c:<id>" marks a
	// creation.
	key   string
	msgID string // for creations and edits
	data  []byte // for notices
}

// event is an entry as written to a browser.
type event struct {
	seq  uint64
	data []byte
}

// convStore holds the conversation logs: a bounded set of convLogs, and
// the counters of message and event ids. Its mutex guards the logs too.
type convStore struct {
	// epoch distinguishes this process's message and event ids from those
	// of an earlier run.
	epoch string

	mu     sync.Mutex
	seq    uint64 // message ids
	events uint64 // event ids
	convs  map[string]*convLog
}

// newID returns a process-unique id starting with prefix.
func (s *convStore) newID(prefix string) string {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	return prefix + s.epoch + "-" + strconv.FormatUint(n, 10)
}

// convLog is one conversation's recent history and its live subscribers.
// The convStore's mutex guards it.
type convLog struct {
	entries []entry
	msgs    map[string]*message
	// seqs is the adapter's event counter, shared by all conversations so
	// that a forgotten and recreated conversation never reuses an id.
	seqs *uint64
	subs map[chan struct{}]struct{}
	used time.Time
	// lines holds each thread's status line, "" for the main line.
	lines map[string]statusLine
}

// conv returns the log of conversation id, creating it (and forgetting the
// least recently used idle conversation beyond maxConvs). s.mu is held.
func (s *convStore) conv(id string) *convLog {
	l := s.convs[id]
	if l == nil {
		if len(s.convs) >= maxConvs {
			s.evictConv()
		}
		l = &convLog{msgs: make(map[string]*message), seqs: &s.events, subs: make(map[chan struct{}]struct{}), lines: make(map[string]statusLine)}
		s.convs[id] = l
	}
	l.used = time.Now()
	return l
}

func (s *convStore) evictConv() {
	var oldest string
	var at time.Time
	for id, l := range s.convs {
		if len(l.subs) == 0 && (oldest == "" || l.used.Before(at)) {
			oldest, at = id, l.used
		}
	}
	if oldest != "" {
		delete(s.convs, oldest)
	}
}

func (l *convLog) push(e entry) {
	if e.key != "" && e.key[0] != 'c' {
		l.entries = slices.DeleteFunc(l.entries, func(x entry) bool { return x.key == e.key })
	}
	*l.seqs++
	e.seq = *l.seqs
	l.entries = append(l.entries, e)
	for len(l.msgs) > maxMessages || len(l.entries) > maxEntries {
		l.dropOldest()
	}
	for ch := range l.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// dropOldest forgets the oldest entry; a creation takes its message along.
func (l *convLog) dropOldest() {
	i := 0
	if len(l.msgs) > maxMessages {
		i = slices.IndexFunc(l.entries, func(x entry) bool { return x.key[0] == 'c' })
	}
	e := l.entries[i]
	l.entries = slices.Delete(l.entries, i, i+1)
	if e.key[0] == 'c' {
		delete(l.msgs, e.msgID)
		l.entries = slices.DeleteFunc(l.entries, func(x entry) bool { return x.key == "u:"+e.msgID })
	}
}

// add appends a new message.
func (l *convLog) add(m *message) {
	m.Type = "msg"
	l.msgs[m.ID] = m
	l.push(entry{key: "c:" + m.ID, msgID: m.ID})
}

// update records that m changed; a message already forgotten stays so.
func (l *convLog) update(m *message) {
	if l.msgs[m.ID] != m {
		return
	}
	l.push(entry{key: "u:" + m.ID, msgID: m.ID})
}

// status sets thread's status line to text ("" clears it) and returns the
// notice pushed; a line whose text does not change keeps its start.
func (l *convLog) status(thread, text string, now time.Time) notice {
	since := now.UTC()
	if line, ok := l.lines[thread]; ok && line.text == text {
		since = line.since
	}
	return l.showStatus(thread, text, since)
}

// showStatus sets thread's status line to text, begun at since ("" clears
// it), and returns the notice pushed.
func (l *convLog) showStatus(thread, text string, since time.Time) notice {
	n := notice{Type: "status", Thread: thread, Text: text}
	if text == "" {
		delete(l.lines, thread)
	} else {
		l.lines[thread] = statusLine{text: text, since: since}
		n.Since = &since
	}
	data, _ := json.Marshal(n)
	l.push(entry{key: "s:" + thread, data: data})
	return n
}

// toast shows a toast and returns the notice pushed.
func (l *convLog) toast(thread, text string) notice {
	n := notice{Type: "toast", Thread: thread, Text: text}
	data, _ := json.Marshal(n)
	l.push(entry{key: "t", data: data})
	return n
}

// since returns the entries after seq, messages in their current state.
func (l *convLog) since(seq uint64) []event {
	i, _ := slices.BinarySearchFunc(l.entries, seq+1, func(e entry, s uint64) int {
		switch {
		case e.seq < s:
			return -1
		case e.seq > s:
			return 1
		}
		return 0
	})
	out := make([]event, 0, len(l.entries)-i)
	for _, e := range l.entries[i:] {
		data := e.data
		if e.msgID != "" {
			data, _ = json.Marshal(l.msgs[e.msgID])
		}
		out = append(out, event{seq: e.seq, data: data})
	}
	return out
}

// eventID formats an SSE event id.
func (s *convStore) eventID(seq uint64) string {
	return s.epoch + "." + strconv.FormatUint(seq, 10)
}

// parseEventID returns the sequence number of an event id from this
// process, and false for an id from another process (or garbage).
func (s *convStore) parseEventID(id string) (uint64, bool) {
	epoch, n, ok := strings.Cut(id, ".")
	if !ok || epoch != s.epoch {
		return 0, false
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	return seq, err == nil
}
