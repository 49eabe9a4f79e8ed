package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/internal/crashpoint"
)

// How the pump takes the items of one key: from the session it holds, or
// by taking the session over, and how it hands them to the mailboxes.

// key takes what is there for key, if this replica is the one to. A key
// whose session another replica held a moment ago costs no round trip.
// It holds key's gate throughout, so what the intake takes for key
// (admit) is posted after what this takes, or before it.
func (p *pump) key(ctx context.Context, key string, reclaim bool) {
	defer p.gate.lock(key)()
	held, path := p.sessions.cached(key) != nil, ""
	if !held {
		if until, ok := p.elsewhere[key]; ok && time.Now().Before(until) {
			return
		}
		held, path = p.held(ctx, key)
	}
	if held {
		take := p.consume.Consume
		if reclaim {
			take = p.inbox.Claim
		}
		items, err := take(ctx, key)
		if err != nil {
			p.log.Warn("inbox: take the items of a held session", "key", key, "err", err)
			p.resync.schedule(key, time.Now(), reclaim)
			return
		}
		if len(items) > 0 {
			crashpoint.Hit(crashpoint.PumpHandoff)
		}
		p.hand(ctx, items, reclaim, nil)
		return
	}
	delete(p.elsewhere, key)
	if p.elsewhereNow(ctx, key, path) {
		return
	}
	pending, err := p.inbox.Pending(ctx, key)
	if err != nil || len(pending) == 0 {
		return
	}
	guard, err := p.locker.Acquire(ctx, "inbox:"+key, 0)
	if err != nil {
		return // another replica is looking at it
	}
	defer release(context.WithoutCancel(ctx), p.log, guard)
	if !p.take(ctx, key, pending[0]) {
		p.elsewhere[key] = time.Now().Add(elsewhereWait)
		return
	}
	items, err := p.inbox.Claim(ctx, key)
	if err != nil {
		p.log.Warn("inbox: claim", "key", key, "err", err)
		p.resync.schedule(key, time.Now(), true)
		return
	}
	if len(items) > 0 {
		crashpoint.Hit(crashpoint.PumpHandoff)
	}
	p.hand(ctx, p.withOwnHeld(ctx, key, pending, items), true, nil)
}

// withOwnHeld adds to claimed, the items of key a takeover claimed, those
// this replica took under a lease of the session it lost since (their
// runs were stopped unrecorded), in the inbox's order: Claim hands over
// only what other replicas hold, so without this they waited for a
// restart. They are the items pending before the takeover (before) and
// still pending after the claim, which did not return them.
func (p *pump) withOwnHeld(ctx context.Context, key string, before, claimed []cluster.InboxItem) []cluster.InboxItem {
	after, err := p.inbox.Pending(ctx, key)
	if err != nil {
		p.log.Warn("inbox: items held under a lost lease", "key", key, "err", err)
		return claimed
	}
	ours := map[string]bool{}
	for _, it := range before {
		ours[it.ID] = true
	}
	byID := map[string]cluster.InboxItem{}
	for _, it := range claimed {
		byID[it.ID] = it
	}
	all := make([]cluster.InboxItem, 0, len(claimed))
	for _, it := range after { // oldest first
		if c, ok := byID[it.ID]; ok {
			all = append(all, c)
			delete(byID, it.ID)
		} else if ours[it.ID] {
			all = append(all, it)
		}
	}
	for _, it := range claimed { // no longer pending: as Claim gave them
		if _, ok := byID[it.ID]; ok {
			all = append(all, it)
		}
	}
	return all
}

// held reports whether this replica holds the session of location key,
// and the session file the index binds key to ("" when it was not asked
// or binds none); it asks the index only about a location it has not
// found bound to a session it holds (cluster_located.go).
func (p *pump) held(ctx context.Context, key string) (bool, string) {
	if p.sessions.cached(key) != nil {
		return true, ""
	}
	path, ok, err := p.index.Get(ctx, key)
	if err != nil || !ok {
		return false, ""
	}
	p.sessions.mu.Lock()
	o := p.sessions.owners[path]
	p.sessions.mu.Unlock()
	if o == nil || leaseDone(o.lease) {
		return false, path
	}
	p.sessions.located.remember(key, o)
	return true, path
}

// elsewhereNow reports whether the session file at path, which this
// replica does not hold, is held by another replica's lease, and then
// leaves key to that replica for elsewhereWait, as a failed takeover
// does: the holder takes the items (told by the inbox's notice, or at
// its poll). One round trip instead of a takeover attempt's five; a
// session nobody holds, or a probe that fails, goes on to the takeover.
func (p *pump) elsewhereNow(ctx context.Context, key, path string) bool {
	if path == "" || p.probe == nil {
		return false
	}
	taken, err := p.probe.Taken(ctx, path)
	if err != nil || !taken {
		return false
	}
	p.elsewhere[key] = time.Now().Add(elsewhereWait)
	return true
}

// take loads (or creates) the session of key's items under its lease;
// false when another replica holds it or it cannot be had now.
func (p *pump) take(ctx context.Context, key string, first cluster.InboxItem) bool {
	var err error
	var item inboxItem
	decoded := json.Unmarshal(first.Data, &item) == nil
	if path, ok, gerr := p.index.Get(ctx, key); gerr != nil {
		err = gerr
	} else if ok {
		// A file bound but never created (its creator died) is created
		// for the first item's location.
		var unborn *chat.Inbound
		if decoded && item.In.Conv.Key() == key {
			unborn = &item.In
		}
		var o *owner
		if o, err = p.sessions.owner(ctx, path, unborn); err == nil && leaseDone(o.lease) {
			// Its lease was lost a moment ago and its watcher has not
			// unloaded it yet: claiming now would race the watcher's
			// leave of its items (cluster_leave.go).
			return false
		}
	} else {
		if !decoded {
			return true // claimed and dropped by hand
		}
		_, _, err = p.sessions.locate(ctx, item.In)
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, cluster.ErrLeaseHeld):
		return false
	default:
		p.log.Warn("inbox: take over a session", "key", key, "err", err)
		return false
	}
}

// hand posts items to their mailboxes. Claimed items are replayed as at a
// restart: one whose work crashed pibot twice is set aside (unless it is
// answered: recovery.setAside), replies cut off by the
// previous holder are marked, and redeliveries of them are duplicates.
// The pump's goroutine and the intake (admit) both call it, each under
// the gate of the items' key; it touches none of the pump's own state.
// own, from an admission (nil for the pump's takes), is the item it
// enqueued, handed on as the intake decided it rather than decoded again.
func (p *pump) hand(ctx context.Context, items []cluster.InboxItem, claimed bool, own *ownItem) {
	if len(items) == 0 {
		return
	}
	if claimed {
		p.rc.markInterrupted(ctx, items)
	}
	now := time.Now()
	var events map[string]bool // the dedupe keys handed so far, when there are several items
	for _, it := range items {
		if at, ok := enqueuedAt(it.ID); ok {
			p.metrics.inboxTaken(now.Sub(at))
		}
		if p.rc.setAside(ctx, it) {
			continue
		}
		var item inboxItem
		if mine := own != nil && it.ID == own.id; mine {
			item = own.item
		} else if err := json.Unmarshal(it.Data, &item); err != nil {
			p.log.Error("inbox item unreadable; dropping", "id", it.ID, "err", err)
			if err := p.inbox.Ack(ctx, it.Key, it.ID); err != nil {
				p.log.Error("inbox: drop an unreadable item", "id", it.ID, "err", err)
			}
			continue
		}
		if k := item.In.DedupKey; k != "" && len(items) > 1 {
			// Two items of one event: an admission without a token of
			// its own run again after a lost answer, or a refused one
			// whose dedupe key could not be kept (Forget keeps a key
			// that names its enqueued item), and its redelivery came
			// with it (a take hands over what lost answers took).
			if events[k] {
				p.log.Info("inbox: a second item of one event dropped", "id", it.ID, "key", k)
				if err := p.inbox.Ack(ctx, it.Key, it.ID); err != nil {
					p.log.Warn("inbox: drop a second item of one event", "id", it.ID, "err", err)
				}
				continue
			}
			if events == nil {
				events = map[string]bool{}
			}
			events[k] = true
		}
		if claimed {
			p.rc.markSeen(ctx, item.In.DedupKey)
		}
		ref := inboxRef{key: it.Key, id: it.ID, begun: own != nil && own.begun && it.ID == own.id, left: p.given.of(it.Key)}
		p.post(ref, item, claimed)
	}
}

// enqueuedAt reads the enqueue time from an inbox item id shaped as a
// Redis stream id ("<unix ms>-<seq>", the Redis server's clock).
func enqueuedAt(id string) (time.Time, bool) {
	ms, _, ok := strings.Cut(id, "-")
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(n), true
}
