package cluster

import (
	"bytes"
	"encoding/json"
	"os"

	"github.com/pibot/pibot/internal/atomicfile"
	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/internal/groupsync"
)

// compactLines is how many records the inbox writes before it may
// compact its file while running (InboxOptions.CompactAfter sets fewer): then, when the records of items that
// are done outnumber those of the items it still holds (compactDue), the
// file is rewritten to what it holds, so it stays as long as the pending
// and quarantined items and not as the history of every message.
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

// maybeCompact compacts the file when it is due. A failed compaction
// leaves the file as it was (it is tried again after as many records);
// the inbox goes on appending to it.
func (l *inboxLog) maybeCompact() {
	if !l.compactDue() {
		return
	}
	l.swap.Lock()
	defer l.swap.Unlock()
	if !l.compactDue() || l.f == nil {
		return
	}
	// Everything the old file was told is durable first: a caller still
	// waiting for an fsync of it (Enqueue's durable) then finds its write
	// synced, and a crash before the rename keeps the old file whole.
	if err := l.f.Sync(); err != nil {
		l.lines.Store(0)
		return
	}
	old := l.f
	if err := l.rewrite(); err != nil {
		l.lines.Store(0)
		return
	}
	_ = old.Close()
}

// rewrite replaces the file, atomically and durably, with the records of
// what the state holds: each quarantined item (held), each pending item (keep,
// with its crash count, and run when its work executes here, so that a
// crash counts against it as the records it replaces would have), and
// opens it for appending. The caller holds swap exclusively, or is
// OpenInbox.
func (l *inboxLog) rewrite() error {
	var buf bytes.Buffer
	write := func(rec inboxRecord) {
		line, _ := json.Marshal(rec)
		buf.Write(line)
		buf.WriteByte('\n')
	}
	l.st.mu.Lock()
	for _, q := range l.st.quarantined {
		write(inboxRecord{Op: "held", ID: q.ID, Key: q.Key, Data: q.Data, Crashes: q.Crashes})
	}
	order := l.st.order[:0]
	for _, id := range l.st.order {
		it, ok := l.st.pending[id]
		if !ok {
			continue
		}
		order = append(order, id)
		write(inboxRecord{Op: "keep", ID: id, Key: it.Key, Data: it.Data, Crashes: it.Crashes})
		if l.st.running[id] {
			write(inboxRecord{Op: "run", ID: id, Key: it.Key})
		}
	}
	l.st.order = order
	l.st.mu.Unlock()
	// Opened before the rename: a failure leaves the old file, and l.f
	// on it, as they were.
	f, err := atomicfile.WriteOpenSteps(l.path, buf.Bytes(), os.O_APPEND|os.O_WRONLY, l.step)
	if err != nil {
		return err
	}
	l.f = groupsync.NewNamed(f, l.path)
	l.lines.Store(0)
	return nil
}

// step marks a step of the file's replacement: its crash point (a
// crashpoints build can end the process there), then onStep (tests).
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
