package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/pibot/pibot/internal/atomicfile"
	"github.com/pibot/pibot/internal/groupsync"
)

// InboxItem is an accepted inbound event not yet applied to its session.
type InboxItem struct {
	ID string `json:"id"`
	// Key is what the item is queued under: the chat location it belongs
	// to (a location belongs to one session, whose owner takes its items).
	// Items written before keys existed have "".
	Key  string          `json:"key,omitempty"`
	Data json.RawMessage `json:"data"`
	// Crashes counts the processes that started handling the item and
	// crashed before it was done (see LocalInbox).
	Crashes int `json:"crashes,omitempty"`
}

// inboxRecord is one line of the inbox file.
type inboxRecord struct {
	// Op is add (accepted by this process), keep (carried over by the
	// compaction at open), try (taken by Consume or Claim), run (its work
	// executes: Begin), cut (its handling was cut: one crash more, and no
	// longer this process's; Leave), ack, quarantine, held (a quarantined
	// item carried over) or clean (the process closed the inbox: nothing
	// it handled crashed it).
	Op      string          `json:"op"`
	ID      string          `json:"id,omitempty"`
	Key     string          `json:"key,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Crashes int             `json:"crashes,omitempty"`
}

// line is r's JSON line (json.Marshal's bytes and a newline), encoded
// into a buffer sized for it: json.Marshal's result has no room for the
// newline, and appending one copied every accepted message once more.
func (r inboxRecord) line() ([]byte, error) {
	b := bytes.NewBuffer(make([]byte, 0, len(r.Data)+len(r.Key)+len(r.ID)+64))
	if err := json.NewEncoder(b).Encode(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// LocalInbox is the embedded durable inbox: an fsynced JSONL log of accepted
// events and their acknowledgements, queued under a key each (the chat
// location; inbox_keys.go). An item is durable once Enqueue's durable
// function returns; after a crash, Claim hands over what the dead process
// accepted but did not apply.
//
// It counts crashes per item: an item whose work the last process was
// executing (Begin: a run took its message, or its command's or press's
// handler ran) and did not acknowledge, when that process ended without
// Close, was executing during a crash. An item that only waited (accepted,
// taken, queued behind others) counts nothing: a crash is not its doing.
// Quarantine sets an item aside for good: it is kept in the file, never
// pending again.
//
// LocalInbox holds the gateway-facing methods over two parts: its state
// in memory (inboxState) and its file (inboxLog), whose records change
// the state.
type LocalInbox struct {
	st  *inboxState
	log *inboxLog
}

// inboxState is what the LocalInbox holds in memory: its pending and
// quarantined items and who handles them. The log changes it as it
// writes the records of each change.
type inboxState struct {
	mu          sync.Mutex
	pending     map[string]*InboxItem
	order       []string
	quarantined []InboxItem
	// holders says who handles each pending item (Consume, Claim).
	holders map[string]holder
	// running are the pending items whose work this process executes
	// (Begin).
	running map[string]bool
}

// inboxLog is the LocalInbox's file: the records of every change of its
// state, written as the state changes, and compacted while it runs
// (inbox_compact.go).
type inboxLog struct {
	// swap is held shared by every change (a record written and the
	// state in memory changed with it) and exclusively while the file is
	// compacted and replaced (inbox_compact.go): f and the state in
	// memory then say the same.
	swap sync.RWMutex
	// lines counts the records written since the file was last
	// compacted; compactMin is the least of them that starts a
	// compaction (compactLines, or InboxOptions.CompactAfter).
	lines      atomic.Int64
	compactMin int64

	path string
	f    *groupsync.File // concurrent Adds share one fsync
	st   *inboxState

	// tail keeps the records written while a compaction writes the new
	// file; bg runs the compactions (inbox_compact.go).
	tail compactTail
	bg   compactor
	// onStep, when set (tests), is told each step of a compaction's
	// replacement of the file, after its crash point (inbox_compact.go).
	onStep func(atomicfile.Step)
}

// add appends records (whole lines) to the file without waiting for the
// disk, as groupsync.File.Write does; a compaction in progress keeps them
// for the new file. The caller holds swap shared.
func (l *inboxLog) add(b []byte) error {
	if err := l.f.Write(b); err != nil {
		return err
	}
	l.tail.keep(b)
	return nil
}

// addAsync is add returning a wait for the records to be durable, as
// groupsync.File.WriteAsync does.
func (l *inboxLog) addAsync(b []byte) (wait func() error, err error) {
	wait, err = l.f.WriteAsync(b)
	if err != nil {
		return nil, err
	}
	l.tail.keep(b)
	return wait, nil
}

// addSync is add returning once the records are durable, as
// groupsync.File.WriteSync does.
func (l *inboxLog) addSync(b []byte) error {
	wait, err := l.addAsync(b)
	if err != nil {
		return err
	}
	return wait()
}

// InboxOptions tunes OpenInboxWith; the zero value is OpenInbox's inbox.
type InboxOptions struct {
	// CompactAfter is the least number of records written since the file
	// was last compacted that lets the inbox compact it while running
	// (0: 4,096). Tests set fewer, so that a short conversation reaches
	// a compaction (a crashpoints build of pibot takes it from
	// PIBOT_CRASHPOINT_INBOX_COMPACT); pibot's configuration has no key
	// for it.
	CompactAfter int64
}

// holder says who handles a pending item.
type holder int8

const (
	heldByNone holder = iota // enqueued, not consumed yet
	heldBySelf               // consumed or claimed by this process
	heldByDead               // carried over from a process that ended
)

// OpenInbox opens (or creates) the inbox at path and compacts it to the
// pending and quarantined items, counting the crash of the last process
// if it did not close the inbox. A torn last line is dropped, and so are
// the temporary files of a compaction the last process did not finish.
// The inbox is its process's alone (the data directory's lock).
func OpenInbox(path string) (*LocalInbox, error) { return OpenInboxWith(path, InboxOptions{}) }

// OpenInboxWith is OpenInbox with opts.
func OpenInboxWith(path string, opts InboxOptions) (*LocalInbox, error) {
	st := &inboxState{pending: map[string]*InboxItem{}, holders: map[string]holder{}, running: map[string]bool{}}
	compactMin := int64(compactLines)
	if opts.CompactAfter > 0 {
		compactMin = opts.CompactAfter
	}
	ib := &LocalInbox{st: st, log: &inboxLog{path: path, compactMin: compactMin, st: st}}
	// A compaction killed before its rename left its temporary file: the
	// inbox file is the old one, whole, and nothing else writes here.
	if stale, _ := filepath.Glob(atomicfile.TempPattern(path)); len(stale) > 0 {
		for _, p := range stale {
			_ = os.Remove(p)
		}
	}
	handled := map[string]bool{} // executing in the last process
	clean := true
	// Streamed: a file a crash left uncompacted may be long.
	if f, err := os.Open(path); err == nil {
		err = ib.st.replay(f, handled, &clean)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("cluster: inbox %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cluster: inbox: %w", err)
	}
	for _, id := range ib.st.order {
		if it, ok := ib.st.pending[id]; ok {
			if !clean && handled[id] {
				it.Crashes++
			}
			ib.st.holders[id] = heldByDead
		}
	}
	// The crash counts are durable before anything is replayed.
	if err := ib.log.rewrite(); err != nil {
		return nil, fmt.Errorf("cluster: inbox compact: %w", err)
	}
	return ib, nil
}

// replay reads the records of r into s. clean says whether the file is
// empty or ends with a clean stop. A torn last line is dropped.
func (s *inboxState) replay(r io.Reader, handled map[string]bool, clean *bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gathered whole (line is
			// the buffer's, which the next read overwrites).
			head := append([]byte(nil), line...)
			rest, rerr := br.ReadBytes('\n')
			line, err = append(head, rest...), rerr
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var rec inboxRecord
			if json.Unmarshal(line, &rec) == nil {
				*clean = rec.Op == "clean"
				s.apply(rec, handled)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// apply replays one record of the file into s. handled collects the items
// whose work the process that wrote the records was executing.
func (s *inboxState) apply(rec inboxRecord, handled map[string]bool) {
	switch rec.Op {
	case "add", "keep":
		if _, ok := s.pending[rec.ID]; !ok {
			s.order = append(s.order, rec.ID)
		}
		s.pending[rec.ID] = &InboxItem{ID: rec.ID, Key: rec.Key, Data: rec.Data, Crashes: rec.Crashes}
		handled[rec.ID] = false
	case "try":
		// Taken again after the process left it: waiting until its work
		// begins anew.
		handled[rec.ID] = false
	case "run":
		if _, ok := s.pending[rec.ID]; ok {
			handled[rec.ID] = true
		}
	case "cut":
		if it, ok := s.pending[rec.ID]; ok {
			it.Crashes++
			handled[rec.ID] = false
		}
	case "ack":
		delete(s.pending, rec.ID)
	case "quarantine":
		if it, ok := s.pending[rec.ID]; ok {
			delete(s.pending, rec.ID)
			s.quarantined = append(s.quarantined, *it)
		}
	case "held":
		s.quarantined = append(s.quarantined, InboxItem{ID: rec.ID, Key: rec.Key, Data: rec.Data, Crashes: rec.Crashes})
	}
}

// Quarantine sets the pending item id of key aside durably: it stays in
// the file (Quarantined lists it) and is never pending again. An item
// that is not pending under key is left alone.
func (ib *LocalInbox) Quarantine(_ context.Context, key, id string) error {
	ib.st.mu.Lock()
	it, ok := ib.st.pending[id]
	ib.st.mu.Unlock()
	if !ok || it.Key != key {
		return nil
	}
	line, _ := json.Marshal(inboxRecord{Op: "quarantine", ID: id, Key: key})
	ib.log.swap.RLock()
	defer ib.log.swap.RUnlock()
	ib.log.lines.Add(1)
	if err := ib.log.addSync(append(line, '\n')); err != nil {
		return fmt.Errorf("cluster: inbox quarantine: %w", err)
	}
	if ib.st.forget(id) {
		ib.st.mu.Lock()
		ib.st.quarantined = append(ib.st.quarantined, *it)
		ib.st.mu.Unlock()
	}
	return nil
}

// Quarantined returns the items set aside, oldest first.
func (ib *LocalInbox) Quarantined(context.Context) ([]InboxItem, error) {
	ib.st.mu.Lock()
	defer ib.st.mu.Unlock()
	return append([]InboxItem(nil), ib.st.quarantined...), nil
}

// Ack marks the item id of key applied. A lost ack only causes the item
// to be handled again, which its session recognises, so it is written but
// not fsynced, and it waits for no fsync: while the inbox's group commit
// runs, its caller writes the ack out as soon as the fsync returns. Acknowledging an item that is not pending does nothing.
func (ib *LocalInbox) Ack(_ context.Context, key, id string) error {
	if err := ib.log.ack(key, id); err != nil {
		return err
	}
	ib.log.maybeCompact()
	return nil
}

// ack is Ack but for the compaction it may call for.
func (l *inboxLog) ack(key, id string) error {
	line, _ := inboxRecord{Op: "ack", ID: id, Key: key}.line()
	l.swap.RLock()
	defer l.swap.RUnlock()
	l.st.mu.Lock()
	it, ok := l.st.pending[id]
	l.st.mu.Unlock()
	if !ok || it.Key != key || !l.st.forget(id) {
		return nil
	}
	// Written outside l.st.mu: the write may wait behind an fsync, and
	// Begin must not.
	l.lines.Add(1)
	if err := l.add(line); err != nil {
		return fmt.Errorf("cluster: inbox ack: %w", err)
	}
	if err := l.f.Flush(); err != nil {
		return fmt.Errorf("cluster: inbox ack: %w", err)
	}
	return nil
}

// forget drops id from the pending items; false if it was not pending.
func (s *inboxState) forget(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pending[id]; !ok {
		return false
	}
	delete(s.pending, id)
	delete(s.holders, id)
	delete(s.running, id)
	if len(s.order) > 2*len(s.pending)+64 {
		kept := s.order[:0]
		for _, o := range s.order {
			if _, ok := s.pending[o]; ok {
				kept = append(kept, o)
			}
		}
		s.order = kept
	}
	return true
}

// All returns every item not yet acknowledged, of every key, oldest
// first (for tests and tools; the gateway asks per key).
func (ib *LocalInbox) All() []InboxItem { return ib.st.items(func(*InboxItem) bool { return true }) }

// items lists the pending items that keep accepts, oldest first.
func (s *inboxState) items(keep func(it *InboxItem) bool) []InboxItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []InboxItem
	for _, id := range s.order {
		if it, ok := s.pending[id]; ok && keep(it) {
			out = append(out, *it)
		}
	}
	return out
}

// Len returns the number of pending items.
func (ib *LocalInbox) Len() int {
	ib.st.mu.Lock()
	defer ib.st.mu.Unlock()
	return len(ib.st.pending)
}

// Sync makes every write so far durable. After a failed write (a full
// disk) it tries to recover the file, so it doubles as a health probe:
// nil means the inbox can take messages again.
func (ib *LocalInbox) Sync() error {
	ib.log.swap.RLock()
	defer ib.log.swap.RUnlock()
	if err := ib.log.f.Sync(); err != nil {
		return fmt.Errorf("cluster: inbox: %w", err)
	}
	return nil
}

// Close records a clean stop (the items still pending did not crash this
// process) and closes the file.
func (ib *LocalInbox) Close() error {
	line, _ := json.Marshal(inboxRecord{Op: "clean"})
	ib.log.bg.Lock()
	ib.log.bg.closing = true
	ib.log.bg.Unlock()
	ib.log.bg.wg.Wait() // a compaction in progress ends first
	ib.log.swap.Lock()
	defer ib.log.swap.Unlock()
	err := ib.log.f.Write(append(line, '\n'))
	return errors.Join(err, ib.log.f.Close())
}
