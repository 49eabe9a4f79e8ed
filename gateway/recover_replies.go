package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway/stream"
	"github.com/pibot/pibot/internal/crashpoint"
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

const interruptedNote = "⚠️ _This reply was interrupted because pibot restarted._"

// replyRecord is the data of a pibot.reply entry.
type replyRecord struct {
	Refs  []chat.MsgRef `json:"refs,omitempty"`
	State string        `json:"state"`
}

// replyWriter appends pibot.reply entries (a run's replySite, unless the
// run is frozen).
type replyWriter interface {
	recordReply(refs []chat.MsgRef, state string)
	frozen() bool
}

// replySite is a run as its reply journal writes it.
type replySite struct{ r *run }

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

// recordReply appends a pibot.reply entry and puts it into the file
// without waiting for the disk: the group commit makes it durable within
// Config.SessionGroupWindow.
func (s replySite) recordReply(refs []chat.MsgRef, state string) {
	r := s.r
	data, _ := json.Marshal(replyRecord{Refs: refs, State: state})
	e := session.Entry{Type: session.TypeCustom, CustomType: customReply, Data: data}
	if _, err := r.o.append(r.loc, e, session.SyncWritten); err != nil {
		r.o.log.Warn("record the messages of a reply", "loc", r.loc.key, "err", err)
		return
	}
	if state == replyStreaming {
		crashpoint.Hit(crashpoint.ReplyJournal)
	}
}

// frozen reports that the run records nothing more (shutdown).
func (s replySite) frozen() bool { return s.r.frozen.Load() }

// markInterrupted marks the replies a crash cut off mid-stream in the
// sessions of the accepted messages (a reply is streamed only while its
// message is in the inbox), and closes their journal entries.
func (rc *recovery) markInterrupted(ctx context.Context, items []cluster.InboxItem) {
	paths := map[string]bool{}
	for _, it := range items {
		var item inboxItem
		if json.Unmarshal(it.Data, &item) != nil || item.In.Conv.Platform == "" {
			continue
		}
		path, ok, err := rc.index.Get(ctx, item.In.Conv.Key())
		if err != nil {
			rc.log.Warn("index: find the session of an accepted message", "conv", item.In.Conv.Key(), "err", err)
			continue
		}
		if ok {
			paths[path] = true
		}
	}
	for path := range paths {
		o, err := rc.sessions.owner(ctx, path, nil)
		if err != nil {
			rc.log.Warn("open a session to mark interrupted replies", "path", path, "err", err)
			continue
		}
		// Where a run of this process streams, its reply is live, not
		// cut off (a holder's reclaim may hand items of another
		// consumer while its own run goes on): idleHeads leaves it out.
		heads := o.idleHeads()
		for key, head := range heads {
			rr, open := o.openReply(key, head)
			if !open {
				continue
			}
			if answerStored(o.tree(), head) {
				// The run's answer is in the file: the replay of its
				// message finishes this reply (redeliver) rather than
				// marking it and answering again.
				rc.log.Info("leaving a reply cut off by a restart to be finished with its stored answer", "loc", key, "messages", len(rr.Refs))
				continue
			}
			rc.log.Info("marking a reply cut off by a restart interrupted", "loc", key, "messages", len(rr.Refs))
			rc.markReply(ctx, rr.Refs, nil)
			loc := o.location(key, rr.Refs[0].Conv)
			data, _ := json.Marshal(replyRecord{Refs: rr.Refs, State: replyMarked})
			if _, err := o.append(loc, session.Entry{Type: session.TypeCustom, CustomType: customReply, Data: data}, session.SyncGrouped); err != nil {
				rc.log.Warn("record a marked reply", "loc", key, "err", err)
			}
		}
	}
}

// markReply edits the messages of an interrupted reply with a note, except
// those in done.
func (rc *recovery) markReply(ctx context.Context, refs []chat.MsgRef, done map[string]bool) {
	for _, ref := range refs {
		ad := rc.adapters[ref.Conv.Platform]
		if ad == nil || done[ref.Key()] {
			continue
		}
		if err := ad.Edit(ctx, ref, chat.Out{Markdown: interruptedNote}); err != nil {
			rc.log.Warn("mark interrupted reply", "ref", ref.Key(), "err", err)
		}
	}
}

// legacyRun is an entry of runs.json, where pibot kept its reply journal
// before it moved into the session files.
type legacyRun struct {
	Path  string        `json:"path"`
	Loc   string        `json:"loc"`
	Refs  []chat.MsgRef `json:"refs"`
	Noted bool          `json:"noted"`
}

// markLegacyRuns marks the replies a runs.json left by an older pibot
// names, once: the file is then removed. A delivered reply (its delivery
// is recorded on the location's branch) is left alone.
func (rc *recovery) markLegacyRuns(ctx context.Context) {
	path := filepath.Join(rc.dataDir, "runs.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	runs := map[string]legacyRun{}
	if err == nil {
		err = json.Unmarshal(b, &runs)
	}
	if err != nil {
		rc.log.Warn("runs.json of an older pibot unreadable; its replies are not marked", "err", err)
	}
	for _, lr := range runs {
		if lr.Noted || len(lr.Refs) == 0 {
			continue
		}
		rc.markReply(ctx, lr.Refs, rc.deliveredRefs(ctx, lr.Path, lr.Loc))
	}
	if err := os.Remove(path); err != nil {
		rc.log.Warn("remove runs.json of an older pibot", "err", err)
		return
	}
	rc.log.Info("runs.json of an older pibot read and removed: the reply journal is in the session files now", "replies", len(runs))
}

// deliveredRefs returns the chat messages of the latest delivery recorded
// on the branch of loc in the session at path.
func (rc *recovery) deliveredRefs(ctx context.Context, path, loc string) map[string]bool {
	o, err := rc.sessions.owner(ctx, path, nil)
	if err != nil {
		return nil
	}
	head, ok := o.headOf(loc)
	if !ok {
		return nil
	}
	branch, err := o.tree().Branch(head)
	if err != nil {
		return nil
	}
	for i := len(branch) - 1; i >= 0; i-- {
		if d, ok := deliveryOf(branch[i]); ok {
			done := map[string]bool{}
			for _, k := range d.Refs {
				done[k] = true
			}
			return done
		}
	}
	return nil
}
