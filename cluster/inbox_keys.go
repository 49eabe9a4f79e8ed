package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Enqueue stores data under key and returns its id at once, with a
// function that waits until it is durable: the caller may start handling
// the item while the fsync runs, but must not acknowledge it before durable
// returns nil. Concurrent callers share fsyncs. While the file cannot be
// written (a full disk) Enqueue fails at once.
//
// The item is pending for key and held by nobody until a Consume takes
// it. A crash counts against it only once its work begins (Begin).
func (ib *LocalInbox) Enqueue(_ context.Context, key string, data []byte) (id string, durable func() error, err error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	id = hex.EncodeToString(rnd[:])
	line, err := inboxRecord{Op: "add", ID: id, Key: key, Data: data}.line()
	if err != nil {
		return "", nil, fmt.Errorf("cluster: inbox enqueue: %w", err)
	}
	ib.log.swap.RLock()
	ib.log.lines.Add(1)
	wait, err := ib.log.addAsync(line)
	if err != nil {
		ib.log.swap.RUnlock()
		return "", nil, fmt.Errorf("cluster: inbox enqueue: %w", err)
	}
	ib.st.mu.Lock()
	ib.st.pending[id] = &InboxItem{ID: id, Key: key, Data: append(json.RawMessage(nil), data...)}
	ib.st.holders[id] = heldByNone
	ib.st.order = append(ib.st.order, id)
	ib.st.mu.Unlock()
	ib.log.swap.RUnlock()
	return id, func() error {
		if err := wait(); err != nil {
			return fmt.Errorf("cluster: inbox sync: %w", err)
		}
		return nil
	}, nil
}

// Consume hands this process the items of key that nobody handles yet,
// oldest first, and records durably that it handles them (a crash counts
// against one once its work begins: Begin).
func (ib *LocalInbox) Consume(ctx context.Context, key string) ([]InboxItem, error) {
	return ib.log.take(ctx, key, heldByNone)
}

// Claim takes over the items of key that a process which ended (crashed,
// or stopped before it acknowledged them) was handling, or that this one
// left (Leave), oldest first, and records durably that this process
// handles them now. In the embedded inbox every item carried over from an
// earlier process is such an item.
func (ib *LocalInbox) Claim(ctx context.Context, key string) ([]InboxItem, error) {
	return ib.log.take(ctx, key, heldByDead)
}

// Leave tells the inbox that this process no longer handles the items of
// key it took (Consume, Claim): the lease of their session was lost or
// released. The next Claim hands them over again. With cut (the lease was
// lost: their runs were stopped unrecorded) each whose work was executing
// (Begin) counts one crash, durably, as if this process had crashed while
// it executed it, and a later crash of this process does not count it
// again; those that only waited count nothing.
func (ib *LocalInbox) Leave(_ context.Context, key string, cut bool) error {
	ib.log.swap.RLock()
	defer ib.log.swap.RUnlock()
	ib.st.mu.Lock()
	var ids, cuts []string
	for _, id := range ib.st.order {
		if it, ok := ib.st.pending[id]; ok && it.Key == key && ib.st.holders[id] == heldBySelf {
			ids = append(ids, id)
			if cut && ib.st.running[id] {
				cuts = append(cuts, id)
			}
		}
	}
	ib.st.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	if len(cuts) > 0 {
		var buf []byte
		for _, id := range cuts {
			line, _ := json.Marshal(inboxRecord{Op: "cut", ID: id, Key: key})
			buf = append(append(buf, line...), '\n')
		}
		ib.log.lines.Add(int64(len(cuts)))
		if err := ib.log.addSync(buf); err != nil {
			return fmt.Errorf("cluster: inbox leave: %w", err)
		}
	}
	ib.st.mu.Lock()
	defer ib.st.mu.Unlock()
	for _, id := range ids {
		it, ok := ib.st.pending[id]
		if !ok || ib.st.holders[id] != heldBySelf {
			continue // acknowledged meanwhile
		}
		ib.st.holders[id] = heldByDead
		if cut && ib.st.running[id] {
			it.Crashes++
		}
		delete(ib.st.running, id)
	}
	return nil
}

// Begin records that this process now executes the work of the pending
// items ids of key (a run took their messages, or their command's or
// press's handler runs): a crash of this process before they end (Ack,
// Quarantine, Leave) counts against them. The record is written, not
// fsynced: a crash of pibot keeps it, a crash of the machine may lose it
// (the item is then not blamed for that crash). Items not pending under
// key are left alone.
func (ib *LocalInbox) Begin(_ context.Context, key string, ids ...string) error {
	ib.log.swap.RLock()
	defer ib.log.swap.RUnlock()
	var few [4]string
	begun := few[:0] // a run begins one item, or a few
	ib.st.mu.Lock()
	for _, id := range ids {
		if it, ok := ib.st.pending[id]; ok && it.Key == key && !ib.st.running[id] {
			ib.st.running[id] = true
			begun = append(begun, id)
		}
	}
	ib.st.mu.Unlock()
	if len(begun) == 0 {
		return nil
	}
	// Encoded outside ib.st.mu, which every accepted message's Enqueue
	// takes: a run's Begin is on its way to the model.
	var buf []byte
	for _, id := range begun {
		line, _ := json.Marshal(inboxRecord{Op: "run", ID: id, Key: key})
		buf = append(append(buf, line...), '\n')
	}
	// Written outside ib.st.mu, as Ack is: the write may wait behind an
	// fsync.
	ib.log.lines.Add(int64(bytes.Count(buf, []byte{'\n'})))
	if err := ib.log.add(buf); err != nil {
		return fmt.Errorf("cluster: inbox begin: %w", err)
	}
	if err := ib.log.f.Flush(); err != nil {
		return fmt.Errorf("cluster: inbox begin: %w", err)
	}
	return nil
}

// take moves the items of key held by from to this process (Consume,
// Claim), recording it durably.
func (l *inboxLog) take(_ context.Context, key string, from holder) ([]InboxItem, error) {
	l.swap.RLock()
	defer l.swap.RUnlock()
	l.st.mu.Lock()
	var out []InboxItem
	for _, id := range l.st.order {
		if it, ok := l.st.pending[id]; ok && it.Key == key && l.st.holders[id] == from {
			out = append(out, *it)
		}
	}
	l.st.mu.Unlock()
	if len(out) == 0 {
		return nil, nil
	}
	var buf []byte
	for _, it := range out {
		line, _ := json.Marshal(inboxRecord{Op: "try", ID: it.ID, Key: key})
		buf = append(append(buf, line...), '\n')
	}
	l.lines.Add(int64(len(out)))
	if err := l.addSync(buf); err != nil {
		return nil, fmt.Errorf("cluster: inbox take: %w", err)
	}
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	taken := out[:0]
	for _, it := range out {
		// Not acknowledged or taken by another caller meanwhile.
		if h, ok := l.st.holders[it.ID]; ok && h == from {
			l.st.holders[it.ID] = heldBySelf
			taken = append(taken, it)
		}
	}
	return taken, nil
}

// Pending lists the items of key not yet acknowledged, whoever handles
// them, oldest first.
func (ib *LocalInbox) Pending(_ context.Context, key string) ([]InboxItem, error) {
	return ib.st.items(func(it *InboxItem) bool { return it.Key == key }), nil
}

// Keys lists the keys with pending items, each once, in the order of
// their oldest item.
func (ib *LocalInbox) Keys(context.Context) ([]string, error) {
	var keys []string
	seen := map[string]bool{}
	for _, it := range ib.All() {
		if !seen[it.Key] {
			seen[it.Key] = true
			keys = append(keys, it.Key)
		}
	}
	return keys, nil
}

// Takeable returns the keys among keys that have items a Consume would
// hand over now (nobody handles them yet), and with claim also those a
// Claim would (left by this process, or carried over from one that
// ended). It changes nothing.
func (ib *LocalInbox) Takeable(_ context.Context, keys []string, claim bool) ([]string, error) {
	asked := make(map[string]bool, len(keys))
	for _, k := range keys {
		asked[k] = true
	}
	found := map[string]bool{}
	ib.st.mu.Lock()
	for id, it := range ib.st.pending {
		h := ib.st.holders[id]
		if asked[it.Key] && (h == heldByNone || claim && h == heldByDead) {
			found[it.Key] = true
		}
	}
	ib.st.mu.Unlock()
	var out []string
	for _, k := range keys {
		if found[k] {
			out = append(out, k)
			delete(found, k) // a key asked twice is named once
		}
	}
	return out, nil
}
