package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/session"
)

// recovery replays, at start, what a crash or restart left unfinished:
// the accepted messages of the inbox and the replies cut off mid-stream
// (recover_replies.go).
type recovery struct {
	log      *slog.Logger
	inbox    Inbox
	dedupe   Dedupe
	index    Index
	sessions *registry
	adapters map[chat.Platform]chat.Adapter
	replier  *replier
	metrics  *Metrics
	dataDir  string
	// replay hands an accepted message to its mailbox (intake.post).
	replay func(ref inboxRef, item inboxItem, replay bool)
	// later queues work on the mailbox of a location (mailboxes.post):
	// the notices of set-aside items go out there, not in start-up's way.
	later func(loc string, f func()) bool
}

// recover marks replies a crash interrupted (recover_replies.go) and replays the
// inbox: every accepted message whose run did not finish. A message not yet in its
// session is posted to its mailbox again; one already there resumes its run when that
// is safe (see resumable), and answers in the session but not in the chat
// are delivered (recover_replay.go). An item whose work was executing during
// quarantineAfter crashes is set aside instead, unless its answer is in
// the session (setAside).
func (rc *recovery) recover(ctx context.Context) {
	var replay []cluster.InboxItem
	pending := rc.claimAll(ctx)
	rc.markLegacyRuns(ctx)
	rc.markInterrupted(ctx, pending)
	for _, it := range pending {
		if rc.setAside(ctx, it) {
			continue
		}
		replay = append(replay, it)
	}
	for _, it := range replay {
		var item inboxItem
		if err := json.Unmarshal(it.Data, &item); err != nil {
			rc.log.Error("inbox item unreadable; dropping", "id", it.ID, "err", err)
			if err := rc.inbox.Ack(ctx, it.Key, it.ID); err != nil {
				rc.log.Error("inbox: drop an unreadable item", "id", it.ID, "err", err)
			}
			continue
		}
		rc.markSeen(ctx, item.In.DedupKey)
		rc.log.Info("replaying an accepted message", "conv", item.In.Conv.Key(), "kind", item.Kind)
		rc.replay(inboxRef{key: it.Key, id: it.ID}, item, true)
	}
}

// claimAll takes over the inbox items a process that ended left
// unfinished, of every key. Claiming is durable before the replay begins:
// if one of them crashes this process too, the next start knows.
func (rc *recovery) claimAll(ctx context.Context) []cluster.InboxItem {
	keys, err := rc.inbox.Keys(ctx)
	if err != nil {
		// Nothing is lost: the items stay pending for the next start.
		rc.log.Error("inbox: list keys; nothing replayed", "err", err)
		return nil
	}
	var all []cluster.InboxItem
	for _, key := range keys {
		items, err := rc.inbox.Claim(ctx, key)
		if err != nil {
			rc.log.Error("inbox: claim; not replayed", "key", key, "err", err)
			continue
		}
		all = append(all, items...)
	}
	return all
}

// markSeen records the dedupe key of an event taken from the inbox, so a
// platform redelivery of it is a duplicate.
func (rc *recovery) markSeen(ctx context.Context, key string) {
	if key == "" {
		return
	}
	if c, ok := rc.dedupe.(cluster.Committer); ok {
		// Committed: its item is in the inbox (a key Seen records is
		// only pending).
		if err := c.Commit(ctx, key); err != nil {
			rc.log.Warn("dedupe: record a replayed event", "key", key, "err", err)
		}
		return
	}
	if _, err := rc.dedupe.Seen(ctx, key); err != nil {
		// A redelivery is then taken again; its session recognises it.
		rc.log.Warn("dedupe: record a replayed event", "key", key, "err", err)
	}
}

// quarantineAfter is how many crashes during its handling set an inbox
// item aside for good.
const quarantineAfter = 2

// quarantineNotice tells the sender of an item set aside. Its handling
// was cut twice: pibot crashed, or (cluster mode) stalled past its lease.
const quarantineNotice = "⚠️ Handling this message stopped pibot twice (a crash or a stall) before it was answered, so it was set aside and will not be processed again. Send a different request if you still need something. (The operator finds it in pibot's log.)"

// setAside quarantines it when its work was executing during
// quarantineAfter crashes (a crash loop) and reports whether it did. An
// item whose message is answered in its session is not to blame: it is
// replayed, which delivers the answer if the chat does not have it. Only
// when delivering it keeps crashing pibot too (twice quarantineAfter
// crashes) is it set aside, without a notice: its answer is in the
// session, and the log says so.
func (rc *recovery) setAside(ctx context.Context, it cluster.InboxItem) bool {
	if it.Crashes < quarantineAfter {
		return false
	}
	answered := rc.answered(ctx, it)
	if answered && it.Crashes < 2*quarantineAfter {
		rc.log.Info("inbox message in flight during crashes is answered in its session; replayed, not set aside", "id", it.ID, "crashes", it.Crashes)
		return false
	}
	return rc.quarantine(ctx, it, !answered)
}

// answered reports whether it is a message whose entry, on its
// location's branch, is followed by a final answer of the model.
func (rc *recovery) answered(ctx context.Context, it cluster.InboxItem) bool {
	var item inboxItem
	if json.Unmarshal(it.Data, &item) != nil || item.Kind != itemMessage || item.In.Msg.ID == "" || item.In.Conv.Platform == "" {
		return false
	}
	path, ok, err := rc.index.Get(ctx, item.In.Conv.Key())
	if err != nil || !ok {
		return false
	}
	o, err := rc.sessions.owner(ctx, path, nil)
	if err != nil {
		return false
	}
	return o.answeredMsg(o.location(item.In.Conv.Key(), item.In.Conv), item.In.Msg.Key())
}

// quarantine sets aside an item that was being handled during
// quarantineAfter crashes, logs it for the operator and, with notify,
// tells its sender (on the location's mailbox: start-up does not wait
// for the platform). It reports whether the item was set aside.
func (rc *recovery) quarantine(ctx context.Context, it cluster.InboxItem, notify bool) bool {
	c, ok := rc.inbox.(cluster.Quarantiner)
	if !ok {
		return false
	}
	var item inboxItem
	_ = json.Unmarshal(it.Data, &item)
	if err := c.Quarantine(ctx, it.Key, it.ID); err != nil {
		// Not replayed either way: it stays pending for the next start.
		rc.log.Error("inbox: quarantine", "id", it.ID, "err", err)
		return true
	}
	rc.metrics.quarantined()
	rc.log.Error("inbox message quarantined: it was being handled during crashes of pibot; it stays in the inbox file and is not replayed",
		"id", it.ID, "crashes", it.Crashes, "conv", item.In.Conv.Key(), "message", item.In.Msg.Key(), "user", item.In.User.ID, "notified", notify)
	rc.markSeen(ctx, item.In.DedupKey)
	if !notify || item.In.Conv.Platform == "" {
		return true
	}
	send := func() { rc.replier.reply(ctx, item.In, quarantineNotice) }
	if rc.later == nil || !rc.later(item.In.Conv.Key(), send) {
		rc.log.Warn("quarantine notice not sent: the gateway is stopping", "conv", item.In.Conv.Key())
	}
	return true
}

// redeliver sends answers that are in the session but whose delivery is
// not recorded (a crash between the two), as a run of its own, and records
// their delivery. When the reply journal names chat messages of the
// cut-off reply, the run edits them to the answers (posting what they
// cannot hold, removing extra ones): the platform may well have shown the
// whole reply already, and the user sees it once. Without journaled
// messages nothing of the reply was posted, and the answers are posted.
func (o *owner) redeliver(loc *location, p *pending, answers []session.Entry) {
	rr, open := o.openReply(loc.key, o.head(loc))
	if !open {
		rr.Refs = nil
	}
	o.log.Info("delivering an answer recorded before a restart", "loc", loc.key, "message", p.msgKey(), "answers", len(answers), "finishing_messages", len(rr.Refs))
	p.applied = true
	o.runs.startWith(loc, []*pending{p}, func(_ context.Context, r *run) bool {
		r.seed(answers)
		return false
	}, rr.Refs, nil)
}

// unknownOutcome is the result recorded for a tool call that was running
// when pibot stopped: it is never run again blindly.
const unknownOutcome = "pibot restarted while this tool was running; its outcome is unknown. Check the state before running it again."

// unknownOutcomeNotice tells the user which tools were running when their
// run was cut (a restart, or the replica running it died): they are not
// run again, and what they did is unknown.
func unknownOutcomeNotice(tools []string) string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = "`" + t + "`"
	}
	verb, its, it := " was", "its outcome is", "it"
	if len(names) > 1 {
		verb, its, it = " were", "their outcomes are", "them"
	}
	return "⚠️ _My reply was interrupted while " + strings.Join(names, ", ") + verb +
		" running: " + its + " unknown, and I do not run " + it + " again blindly. Continuing from there._"
}
