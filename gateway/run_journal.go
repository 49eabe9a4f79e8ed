package gateway

import (
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/stream"
	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/internal/sessionrun"
	"github.com/pibot/pibot/session"
)

// The reply journal lives in the session file: when a run posts the first
// chat message of its reply (and each further one, when the reply is split),
// it appends a pibot.reply entry naming those messages at its location and
// has the session flushed off the run's path. The run's pibot.delivery
// entry closes it, and so does a pibot.reply entry with another state. After
// a crash, whichever process takes the session over finds the open entries
// and marks their messages interrupted (markInterrupted). pi ignores custom
// entries, so the file stays readable by pi.

const (
	customReply = "pibot.reply"

	// replyStreaming: the reply is being posted.
	replyStreaming = "streaming"
	// replyNoted: a drained run ended the reply with a note of its own.
	replyNoted = "noted"
	// replyEnded: the run ended without a recorded delivery.
	replyEnded = "ended"
	// replyMarked: a restart marked the reply interrupted.
	replyMarked = "marked"
)

// customDelivery is the entry a run appends once the platform confirmed
// its reply (run.deliver): it closes the reply's journal entry.
const customDelivery = "pibot.delivery"

// replyRecord is the data of a pibot.reply entry.
type replyRecord struct {
	Refs  []chat.MsgRef `json:"refs,omitempty"`
	State string        `json:"state"`
}

// replyWriter appends pibot.reply entries (a run's journal, unless the
// run is frozen).
type replyWriter interface {
	recordReply(refs []chat.MsgRef, state string)
	frozen() bool
}

// runJournal is what a run writes to its session at its location's head:
// the messages of its agent (through the session runner), the reply
// journal's pibot.reply entries and the reply's pibot.delivery. Once
// frozen (shutdown, a lost session) it writes nothing more.
type runJournal struct {
	// rec records the agent's messages at the location's head.
	rec  *sessionrun.Runner
	head locHead
	log  *slog.Logger
	// halt stops all recording: nothing more is appended.
	halt atomic.Bool
	// replies are the reply's messages the journal names.
	replies replyJournal
}

// open makes j the journal of a run at loc of f. Its session runner tags
// chat messages with their *pending, whose sender and platform message go
// on the entry; user messages are group-synced because the inbox holds
// them until the session's first fsync after the run's end.
func (j *runJournal) open(f *sessionFile, loc *location, log *slog.Logger) {
	j.head, j.log = locHead{f: f, loc: loc}, log
	j.rec = sessionrun.NewRunner(j.head, sessionrun.Options{UserHeld: true, Meta: func(tag any) *session.Meta {
		meta := &session.Meta{}
		if p, ok := tag.(*pending); ok {
			meta.Msg, meta.From = p.msgKey(), p.item.In.User.ID
		}
		return meta
	}})
}

// freeze stops all recording: nothing more is appended.
func (j *runJournal) freeze() { j.halt.Store(true) }

// frozen reports that the run records nothing more (shutdown).
func (j *runJournal) frozen() bool { return j.halt.Load() }

// message records the message of a message_end at the location's head.
func (j *runJournal) message(e agent.Event) (sessionrun.Recorded, error) {
	return j.rec.Record(e)
}

// posted journals the reply's messages once one more of them is posted
// (stream.Options.OnPost).
func (j *runJournal) posted(ctl *stream.Controller) {
	crashpoint.Hit(crashpoint.PostedPart)
	j.replies.update(ctl, j)
}

// endReply closes the reply's journal entry when the run records no
// delivery: state says why (replyNoted, replyEnded).
func (j *runJournal) endReply(refs []chat.MsgRef, state string) {
	j.replies.close(refs, state, j)
}

// recordReply appends a pibot.reply entry and puts it into the file
// without waiting for the disk: the group commit makes it durable within
// Config.SessionGroupWindow.
func (j *runJournal) recordReply(refs []chat.MsgRef, state string) {
	data, _ := json.Marshal(replyRecord{Refs: refs, State: state})
	e := session.Entry{Type: session.TypeCustom, CustomType: customReply, Data: data}
	if _, err := j.head.Append(e, session.SyncWritten); err != nil {
		j.log.Warn("record the messages of a reply", "loc", j.head.loc.key, "err", err)
		return
	}
	if state == replyStreaming {
		crashpoint.Hit(crashpoint.ReplyJournal)
	}
}

// delivered appends the pibot.delivery entry of a reply the platform
// confirmed: keys name its chat messages, entry the answer it carries.
func (j *runJournal) delivered(entry string, keys []string, sync session.SyncPolicy) error {
	data, _ := json.Marshal(delivery{Entry: entry, Refs: keys, State: "delivered"})
	_, err := j.head.Append(session.Entry{Type: session.TypeCustom, CustomType: customDelivery, Data: data, Pibot: &session.Meta{Msg: keys[len(keys)-1]}}, sync)
	return err
}

// replyJournal keeps the chat messages of a reply last named in the
// session's reply journal, so a pibot.reply entry is written only when the
// reply's messages changed.
type replyJournal struct {
	mu        sync.Mutex // held while an entry is written: entries keep the order of the posts
	journaled []chat.MsgRef
}

// update records the reply's messages through w once one more of them is
// posted. The stream calls it after each post (stream.Options.OnPost), on
// the goroutine that posted, before its next platform call.
func (j *replyJournal) update(ctl *stream.Controller, w replyWriter) {
	if ctl == nil || w.frozen() {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	refs := ctl.Refs()
	if slices.Equal(refs, j.journaled) {
		return
	}
	j.journaled = refs
	growJournalStack()
	// Written to the file at once (SyncWritten: a crash of pibot cannot
	// lose it, so a restart finds the reply to mark or finish), without
	// an fsync of its own (at 1,000 busy conversations an fsync per reply
	// cost a quarter more CPU per token and ten times the p99).
	w.recordReply(refs, replyStreaming)
}

// close closes the reply's journal entry through write when the run
// recorded no delivery: state says why (replyNoted, replyEnded).
func (j *replyJournal) close(refs []chat.MsgRef, state string, w replyWriter) {
	j.mu.Lock()
	journaled := len(j.journaled) > 0
	j.mu.Unlock()
	if journaled {
		w.recordReply(refs, state)
	}
}

// delivery is the data of a pibot.delivery entry.
type delivery struct {
	Entry string   `json:"entry"`
	Refs  []string `json:"refs"`
	State string   `json:"state"`
}

// deliveryOf reads a pibot.delivery entry.
func deliveryOf(e session.Entry) (delivery, bool) {
	var d delivery
	if e.Type != session.TypeCustom || e.CustomType != customDelivery {
		return d, false
	}
	return d, json.Unmarshal(e.Data, &d) == nil
}
