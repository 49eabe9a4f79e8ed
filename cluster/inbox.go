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
}

type inboxRecord struct {
	Op   string          `json:"op"` // add | ack
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Inbox is the embedded durable inbox: an fsynced JSONL log of accepted
// messages and their acknowledgements. A message is durable once Add
// returns; after a crash, Pending lists what was accepted but not applied.
type Inbox struct {
	mu      sync.Mutex
	path    string
	f       *groupsync.File // concurrent Adds share one fsync
	pending map[string]json.RawMessage
	order   []string
}

// OpenInbox opens (or creates) the inbox at path and compacts it to the
// pending items. A torn last line is dropped.
func OpenInbox(path string) (*Inbox, error) {
	ib := &Inbox{path: path, pending: map[string]json.RawMessage{}}
	if b, err := os.ReadFile(path); err == nil {
		r := bufio.NewReader(bytes.NewReader(b))
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 && line[len(line)-1] == '\n' {
				var rec inboxRecord
				if json.Unmarshal(line, &rec) == nil {
					switch rec.Op {
					case "add":
						if _, ok := ib.pending[rec.ID]; !ok {
							ib.order = append(ib.order, rec.ID)
						}
						ib.pending[rec.ID] = rec.Data
					case "ack":
						delete(ib.pending, rec.ID)
					}
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
	var order []string
	for _, id := range ib.order {
		if d, ok := ib.pending[id]; ok {
			order = append(order, id)
			line, _ := json.Marshal(inboxRecord{Op: "add", ID: id, Data: d})
			buf.Write(line)
			buf.WriteByte('\n')
		}
	}
	ib.order = order
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
// nil. Concurrent callers share fsyncs.
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
	ib.pending[id] = append(json.RawMessage(nil), data...)
	ib.order = append(ib.order, id)
	ib.mu.Unlock()
	return id, func() error {
		if err := wait(); err != nil {
			return fmt.Errorf("cluster: inbox sync: %w", err)
		}
		return nil
	}, nil
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

// Pending returns the items not yet acknowledged, oldest first.
func (ib *Inbox) Pending() []InboxItem {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	var out []InboxItem
	for _, id := range ib.order {
		if d, ok := ib.pending[id]; ok {
			out = append(out, InboxItem{ID: id, Data: d})
		}
	}
	return out
}

// Len returns the number of pending items.
func (ib *Inbox) Len() int {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return len(ib.pending)
}

// Close closes the file.
func (ib *Inbox) Close() error { return ib.f.Close() }
