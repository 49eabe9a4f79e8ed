package cluster

import (
	"bytes"
	"encoding/json"
	"os"
	"sync"

	"github.com/pibot/pibot/internal/atomicfile"
	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/internal/groupsync"
)

// compactLines is how many records the inbox writes before it may
// compact its file while running (InboxOptions.CompactAfter sets
// another number): then, when the records of items that are done
// outnumber those of the items it still holds (compactDue), the file is
// rewritten to what it holds, so it stays as long as the pending and
// quarantined items and not as the history of every message.
const compactLines = 4096

// compactDue reports whether the file should be compacted: enough
// records written since the last compaction, most of them of items that
// are done.
func (l *inboxLog) compactDue() bool {
	n := l.lines.Load()
	if n < l.compactMin {
		return false
	}
	l.st.mu.Lock()
	live := int64(len(l.st.pending) + len(l.st.quarantined))
	l.st.mu.Unlock()
	return n > 4*live
}

// maybeCompact starts a compaction of the file when one is due and none
// runs. It takes what the state holds and starts keeping every record
// written from then on (tail), under swap exclusively (no record is being
// written: the caller waits for the writes in progress, not for the
// disk), so the new file holds what the inbox held at the Ack that made
// the compaction due; the rest runs on a goroutine of its own (compact):
// the caller (an Ack, on its way from a session's group commit) does not
// wait for the file's encoding, writing or syncing. Close waits for it.
func (l *inboxLog) maybeCompact() {
	if !l.compactDue() {
		return
	}
	l.bg.Lock()
	if l.bg.closing || l.bg.compacting {
		l.bg.Unlock()
		return
	}
	l.bg.compacting = true
	l.bg.wg.Add(1)
	l.bg.Unlock()
	l.swap.Lock()
	if l.f == nil {
		l.swap.Unlock()
		l.bg.end()
		return
	}
	snap := l.st.snapshot()
	l.tail.start()
	l.swap.Unlock()
	go func() {
		defer l.bg.end()
		l.compact(snap)
	}()
}

// compactor is what the inbox's compaction goroutine needs of it: at most
// one runs, and Close (closing) starts none and waits for the one that
// runs.
type compactor struct {
	sync.Mutex
	closing, compacting bool
	wg                  sync.WaitGroup
}

// end ends the compaction that runs.
func (c *compactor) end() {
	c.Lock()
	c.compacting = false
	c.Unlock()
	c.wg.Done()
}

// compact replaces the file with snap, the records of what the state
// held when maybeCompact took it, without holding the writers off while
// the disk works: with no lock held it writes them to a new file and
// syncs it; under swap (exclusively) it syncs the old file (so whoever
// waits for a write of it finds it durable, and a crash before the rename
// keeps it whole), adds the records written meanwhile (tail) to the new
// file, syncs it, renames it over the old one and syncs the directory. So
// the writers wait for three small fsyncs, not for the whole file's
// encoding, writing and syncing. Each step of the replacement is a crash
// point (step): partial (the new file holds snap's records, not those
// written meanwhile), written (the new file whole, the records written
// meanwhile included, and synced), renamed and synced (the directory). A
// failure leaves the file as it was (the compaction is tried again after
// as many records); the inbox goes on appending to it.
func (l *inboxLog) compact(snap inboxSnapshot) {
	// Its first Write is its step StepPartial, reached here, with no lock
	// held; the others are reached in Commit, under swap.
	t, err := atomicfile.BeginSteps(l.path, l.step)
	if err == nil {
		err = t.Write(snap.encode())
		if err == nil {
			err = t.Sync()
		}
		if err != nil {
			t.Discard()
		}
	}

	l.swap.Lock()
	tail := l.tail.stop()
	if err == nil && l.f == nil {
		t.Discard()
		err = os.ErrClosed
	}
	if err != nil {
		l.failed(nil)
		return
	}
	if err := l.f.Sync(); err != nil {
		l.failed(t)
		return
	}
	if err := t.Write(tail); err != nil {
		l.failed(t)
		return
	}
	f, err := t.Commit(os.O_APPEND | os.O_WRONLY)
	if err != nil {
		l.failed(nil)
		return
	}
	old := l.f
	l.f = groupsync.NewNamed(f, l.path)
	l.lines.Store(int64(bytes.Count(tail, []byte{'\n'})))
	l.swap.Unlock()
	_ = old.Close() // synced: nothing was written to it since
}

// failed ends a compaction that failed (the caller holds swap, which it
// releases): t, if not nil, is discarded, and the next compaction waits
// for as many records as this one did.
func (l *inboxLog) failed(t *atomicfile.Temp) {
	if t != nil {
		t.Discard()
	}
	l.lines.Store(0)
	l.swap.Unlock()
}

// rewrite replaces the file, atomically and durably, with the records of
// what the state holds, and opens it for appending, passing the crash
// points of each step as compact does. OpenInbox calls it before the
// inbox is used.
func (l *inboxLog) rewrite() error {
	f, err := atomicfile.WriteOpenSteps(l.path, l.st.snapshot().encode(), os.O_APPEND|os.O_WRONLY, l.step)
	if err != nil {
		return err
	}
	l.f = groupsync.NewNamed(f, l.path)
	l.lines.Store(0)
	return nil
}

// inboxSnapshot is what a compaction writes: each quarantined item
// (held), each pending item (keep, with its crash count, and run when its
// work executes here, so that a crash counts against it as the records
// it replaces would have).
type inboxSnapshot struct {
	held    []InboxItem
	pending []InboxItem
	running []bool // of pending, by index
}

// snapshot copies what s holds for a compaction (items' data are shared:
// they never change), and drops the acknowledged items from s.order.
func (s *inboxState) snapshot() inboxSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := inboxSnapshot{held: append([]InboxItem(nil), s.quarantined...)}
	order := s.order[:0]
	for _, id := range s.order {
		it, ok := s.pending[id]
		if !ok {
			continue
		}
		order = append(order, id)
		snap.pending = append(snap.pending, *it)
		snap.running = append(snap.running, s.running[id])
	}
	s.order = order
	return snap
}

// encode is the file of the snapshot's records (each line as
// inboxRecord.line encodes it), encoded into one buffer sized for them: a
// compaction of a busy inbox writes a megabyte or so, and a buffer grown
// as it went, and a line encoded apart for each record, made four times
// that in garbage.
func (snap inboxSnapshot) encode() []byte {
	size := 0
	for _, it := range snap.held {
		size += len(it.Data) + len(it.Key) + len(it.ID) + 64
	}
	for i, it := range snap.pending {
		size += len(it.Data) + len(it.Key) + len(it.ID) + 64
		if snap.running[i] {
			size += len(it.Key) + len(it.ID) + 32
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	enc := json.NewEncoder(buf)
	write := func(rec inboxRecord) { _ = enc.Encode(rec) }
	for _, q := range snap.held {
		write(inboxRecord{Op: "held", ID: q.ID, Key: q.Key, Data: q.Data, Crashes: q.Crashes})
	}
	for i, it := range snap.pending {
		write(inboxRecord{Op: "keep", ID: it.ID, Key: it.Key, Data: it.Data, Crashes: it.Crashes})
		if snap.running[i] {
			write(inboxRecord{Op: "run", ID: it.ID, Key: it.Key})
		}
	}
	return buf.Bytes()
}

// compactTail keeps the records written while a compaction writes the new
// file, which it adds to it before the swap. on changes only under
// inboxLog.swap held exclusively, and is read under it held shared (by
// the writers): buf has a lock of its own, for the writers.
type compactTail struct {
	on  bool
	mu  sync.Mutex
	buf []byte
}

// keep adds b, records just written to the file, to the tail when a
// compaction keeps one. The caller holds swap shared.
func (t *compactTail) keep(b []byte) {
	if !t.on {
		return
	}
	t.mu.Lock()
	t.buf = append(t.buf, b...)
	t.mu.Unlock()
}

// start starts keeping records. The caller holds swap exclusively.
func (t *compactTail) start() { t.on, t.buf = true, nil }

// stop stops keeping records and returns those kept. The caller holds
// swap exclusively.
func (t *compactTail) stop() []byte {
	b := t.buf
	t.on, t.buf = false, nil
	return b
}

// step marks a step of the file's replacement (compact, rewrite): its
// crash point (a crashpoints build can end the process there), then
// onStep (tests), on the goroutine that reached the step, as it is
// reached.
func (l *inboxLog) step(s atomicfile.Step) {
	// One Hit per constant: a release build inlines Hit away, and the
	// points' names with it (e2e's release check).
	switch s {
	case atomicfile.StepPartial:
		crashpoint.Hit(crashpoint.CompactPartial)
	case atomicfile.StepWritten:
		crashpoint.Hit(crashpoint.CompactWritten)
	case atomicfile.StepRenamed:
		crashpoint.Hit(crashpoint.CompactRenamed)
	case atomicfile.StepSynced:
		crashpoint.Hit(crashpoint.CompactSynced)
	}
	if l.onStep != nil {
		l.onStep(s)
	}
}
