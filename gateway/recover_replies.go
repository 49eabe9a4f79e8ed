package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/session"
)

// What a restart does with the reply journal a run wrote (run_journal.go):
// it marks the replies a crash cut off mid-stream interrupted, and those a
// runs.json of an older pibot names.

const interruptedNote = "⚠️ _This reply was interrupted because pibot restarted._"

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
			rr, open := locView{tree: o.tree(), key: key, head: head}.openReply()
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

// openReply returns the reply of the location's last run when it is still
// marked streaming: the last pibot.reply or pibot.delivery entry of the
// location on its branch is a streaming pibot.reply.
func (v locView) openReply() (replyRecord, bool) {
	for e := range v.tree.BranchBack(v.head) {
		if e.Type != session.TypeCustom || e.Pibot == nil || e.Pibot.Loc != v.key {
			continue
		}
		if _, ok := deliveryOf(e); ok {
			return replyRecord{}, false
		}
		if e.CustomType != customReply {
			continue
		}
		var rr replyRecord
		if json.Unmarshal(e.Data, &rr) != nil {
			return replyRecord{}, false
		}
		return rr, rr.State == replyStreaming && len(rr.Refs) > 0
	}
	return replyRecord{}, false
}
