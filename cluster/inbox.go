package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/pibot/pibot/internal/atomicfile"
	"github.com/pibot/pibot/internal/groupsync"
)

// InboxItem is an accepted inbound message not yet applied to its session.
type InboxItem struct {
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
	// Crashes counts the processes that started handling the item and
	// crashed before it was done (see Inbox).
	Crashes int `json:"crashes,omitempty"`
}

// inboxRecord is one line of the inbox file.
type inboxRecord struct {
	// Op is add (accepted by this process), keep (carried over by the
	// compaction at open), try (a replay begins), ack, quarantine, held (a
	// quarantined item carried over) or clean (the process closed the
	// inbox: nothing it handled crashed it).
	Op      string          `json:"op"`
	ID      string          `json:"id,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Crashes int             `json:"crashes,omitempty"`
}

// Inbox is the embedded durable inbox: an fsynced JSONL log of accepted
// messages and their acknowledgements. A message is durable once Add
// returns; after a crash, Pending lists what was accepted but not applied.
//
// It counts crashes per item: an item the last process accepted (add) or
// began to replay (Attempt) and did not acknowledge, when that process
// ended without Close, was in flight during a crash. A crash that took
// the process down before it touched an item does not count against it.
// Quarantine sets an item aside for good: it is kept in the file, never
// pending again.
type Inbox struct {
	mu          sync.Mutex
	path        string
	f           *groupsync.File // concurrent Adds share one fsync
	pending     map[string]*InboxItem
	order       []string
	quarantined []InboxItem
}

// OpenInbox opens (or creates) the inbox at path and compacts it to the
// pending and quarantined items, counting the crash of the last process
// if it did not close the inbox. A torn last line is dropped.
func OpenInbox(path string) (*Inbox, error) {
	ib := &Inbox{path: path, pending: map[string]*InboxItem{}}
	handled := map[string]bool{} // touched by the last process
	clean := true
	if b, err := os.ReadFile(path); err == nil {
		clean = len(b) == 0
		r := bufio.NewReader(bytes.NewReader(b))
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 && line[len(line)-1] == '\n' {
				var rec inboxRecord
				if json.Unmarshal(line, &rec) == nil {
					clean = rec.Op == "clean"
					ib.apply(rec, handled)
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("cluster: inbox %s: %w", path, err)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cluster: inbox: %w", err)
	}
	var buf bytes.Buffer
	write := func(rec inboxRecord) {
		line, _ := json.Marshal(rec)
		buf.Write(line)
		buf.WriteByte('\n')
	}
	for _, q := range ib.quarantined {
		write(inboxRecord{Op: "held", ID: q.ID, Data: q.Data, Crashes: q.Crashes})
	}
	var order []string
	for _, id := range ib.order {
		it, ok := ib.pending[id]
		if !ok {
			continue
		}
		if !clean && handled[id] {
			it.Crashes++
		}
		order = append(order, id)
		write(inboxRecord{Op: "keep", ID: id, Data: it.Data, Crashes: it.Crashes})
	}
	ib.order = order
	// The crash counts are durable before anything is replayed.
	if err := atomicfile.Write(path, buf.Bytes()); err != nil {
		return nil, fmt.Errorf("cluster: inbox compact: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cluster: inbox: %w", err)
	}
	ib.f = groupsync.New(f)
	return ib, nil
}

// apply replays one record of the file into ib. handled collects the items
// the process that wrote the records touched.
func (ib *Inbox) apply(rec inboxRecord, handled map[string]bool) {
	switch rec.Op {
	case "add", "keep":
		if _, ok := ib.pending[rec.ID]; !ok {
			ib.order = append(ib.order, rec.ID)
		}
		ib.pending[rec.ID] = &InboxItem{ID: rec.ID, Data: rec.Data, Crashes: rec.Crashes}
		handled[rec.ID] = rec.Op == "add"
	case "try":
		handled[rec.ID] = true
	case "ack":
		delete(ib.pending, rec.ID)
	case "quarantine":
		if it, ok := ib.pending[rec.ID]; ok {
			delete(ib.pending, rec.ID)
			ib.quarantined = append(ib.quarantined, *it)
		}
	case "held":
		ib.quarantined = append(ib.quarantined, InboxItem{ID: rec.ID, Data: rec.Data, Crashes: rec.Crashes})
	}
}

// Add stores data durably (fsync) and returns its id.
func (ib *Inbox) Add(ctx context.Context, data []byte) (string, error) {
	id, durable, err := ib.Begin(ctx, data)
	if err != nil {
		return "", err
	}
	if err := durable(); err != nil {
		return "", err
	}
	return id, nil
}

// Begin stores data and returns its id at once, with a function that
// waits until it is durable: the caller may start processing while the
// fsync runs, but must not acknowledge the message before durable returns
// nil. Concurrent callers share fsyncs. While the file cannot be written
// (a full disk) Begin fails at once.
func (ib *Inbox) Begin(_ context.Context, data []byte) (id string, durable func() error, err error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	id = hex.EncodeToString(rnd[:])
	line, err := json.Marshal(inboxRecord{Op: "add", ID: id, Data: data})
	if err != nil {
		return "", nil, fmt.Errorf("cluster: inbox add: %w", err)
	}
	wait, err := ib.f.WriteAsync(append(line, '\n'))
	if err != nil {
		return "", nil, fmt.Errorf("cluster: inbox add: %w", err)
	}
	ib.mu.Lock()
	ib.pending[id] = &InboxItem{ID: id, Data: append(json.RawMessage(nil), data...)}
	ib.order = append(ib.order, id)
	ib.mu.Unlock()
	return id, func() error {
		if err := wait(); err != nil {
			return fmt.Errorf("cluster: inbox sync: %w", err)
		}
		return nil
	}, nil
}

// Attempt records durably that this process begins to handle the items
// ids (a replay): if it crashes before acknowledging them, that crash
// counts against them.
func (ib *Inbox) Attempt(_ context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	var buf []byte
	for _, id := range ids {
		line, _ := json.Marshal(inboxRecord{Op: "try", ID: id})
		buf = append(append(buf, line...), '\n')
	}
	if err := ib.f.WriteSync(buf); err != nil {
		return fmt.Errorf("cluster: inbox attempt: %w", err)
	}
	return nil
}

// Quarantine sets the pending item id aside durably: it stays in the file
// (Quarantined lists it) and is never pending again.
func (ib *Inbox) Quarantine(_ context.Context, id string) error {
	ib.mu.Lock()
	it, ok := ib.pending[id]
	ib.mu.Unlock()
	if !ok {
		return nil
	}
	line, _ := json.Marshal(inboxRecord{Op: "quarantine", ID: id})
	if err := ib.f.WriteSync(append(line, '\n')); err != nil {
		return fmt.Errorf("cluster: inbox quarantine: %w", err)
	}
	if ib.forget(id) {
		ib.mu.Lock()
		ib.quarantined = append(ib.quarantined, *it)
		ib.mu.Unlock()
	}
	return nil
}

// Quarantined returns the items set aside, oldest first.
func (ib *Inbox) Quarantined(context.Context) ([]InboxItem, error) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return append([]InboxItem(nil), ib.quarantined...), nil
}

// Ack marks id applied. A lost ack only causes a redelivery, which the
// session deduplicates, so it is written but not fsynced.
func (ib *Inbox) Ack(_ context.Context, id string) error {
	line, _ := json.Marshal(inboxRecord{Op: "ack", ID: id})
	if !ib.forget(id) {
		return nil
	}
	// Written outside ib.mu: the write may wait behind an fsync, and
	// Begin must not.
	if err := ib.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("cluster: inbox ack: %w", err)
	}
	if err := ib.f.Flush(); err != nil {
		return fmt.Errorf("cluster: inbox ack: %w", err)
	}
	return nil
}

// forget drops id from the pending items; false if it was not pending.
func (ib *Inbox) forget(id string) bool {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	if _, ok := ib.pending[id]; !ok {
		return false
	}
	delete(ib.pending, id)
	if len(ib.order) > 2*len(ib.pending)+64 {
		kept := ib.order[:0]
		for _, o := range ib.order {
			if _, ok := ib.pending[o]; ok {
				kept = append(kept, o)
			}
		}
		ib.order = kept
	}
	return true
}

// Pending returns the items not yet acknowledged, oldest first. The
// embedded inbox holds them in memory, so it never fails.
func (ib *Inbox) Pending(context.Context) ([]InboxItem, error) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	var out []InboxItem
	for _, id := range ib.order {
		if it, ok := ib.pending[id]; ok {
			out = append(out, *it)
		}
	}
	return out, nil
}

// Len returns the number of pending items.
func (ib *Inbox) Len() int {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return len(ib.pending)
}

// Sync makes every write so far durable. After a failed write (a full
// disk) it tries to recover the file, so it doubles as a health probe:
// nil means the inbox can take messages again.
func (ib *Inbox) Sync() error {
	if err := ib.f.Sync(); err != nil {
		return fmt.Errorf("cluster: inbox: %w", err)
	}
	return nil
}

// Close records a clean stop (the items still pending did not crash this
// process) and closes the file.
func (ib *Inbox) Close() error {
	line, _ := json.Marshal(inboxRecord{Op: "clean"})
	err := ib.f.Write(append(line, '\n'))
	return errors.Join(err, ib.f.Close())
}
