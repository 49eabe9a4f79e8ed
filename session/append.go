package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/pibot/pibot/llm"
)

// prepare fills id, timestamp and fence of e and returns its line with the
// trailing newline. Callers run it under sink.queue (or own s exclusively).
func (s *Session) prepare(e *Entry) ([]byte, error) {
	if e.Type == "" || e.Type == TypeSession {
		return nil, fmt.Errorf("session: %s: bad entry type %q", s.path, e.Type)
	}
	if err := s.tree.checkNew(e); err != nil {
		return nil, err
	}
	if e.Timestamp == "" {
		e.Timestamp = Timestamp(s.opts.now())
	}
	if s.opts.Fence != 0 {
		e.Fence = s.opts.Fence
	}
	// What json.Encoder does with an entry (no HTML escaping), without
	// its copies: the entry's own encoding, checked, then compacted in
	// its own buffer (which has room for the newline) into the line.
	b, err := e.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("session: %s: encode entry: %w", s.path, err)
	}
	if !json.Valid(b) {
		err := json.Compact(new(bytes.Buffer), b) // says what is wrong
		return nil, fmt.Errorf("session: %s: encode entry: %w", s.path, err)
	}
	line := append(llm.CompactValid(b), '\n')
	e.Raw = line[: len(line)-1 : len(line)-1]
	return line, nil
}

// Append adds e as one line. The caller sets ParentID ("" for a new
// root); ID and Timestamp are assigned when empty. Lines reach the file at
// the next flush, all lines since the last one in one write followed by
// one fdatasync. With SyncAlways the entry is durable when Append returns;
// with SyncGrouped it becomes durable within the group window (or at
// Flush). Any write or sync failure fences the writer.
func (s *Session) Append(e Entry, sync SyncPolicy) (Entry, error) {
	e, err := s.appendEntry(e)
	if err != nil {
		return Entry{}, err
	}
	switch sync {
	case SyncAlways:
		err = s.Flush()
	case SyncWritten:
		err = s.Write()
	}
	if err != nil {
		return Entry{}, err
	}
	return e, nil
}

// appendEntry indexes e, queues its line for the file and asks the group
// commit for a flush. It never waits for the disk.
func (s *Session) appendEntry(e Entry) (Entry, error) {
	err := s.w.queue(func() ([]byte, error) {
		line, err := s.prepare(&e)
		if err != nil {
			return nil, err
		}
		n := s.tree.add(line[:len(line)-1], 0, &e, knownEntry(&e))
		if n != nil && e.Type == TypeMessage && e.Message != nil {
			// The message as appended is the message as decoded (pi, too,
			// keeps the objects it appended): Context need not decode it.
			d := *e.Message
			d.Content = slices.Clone(d.Content)
			n.decoded.Store(&d)
		}
		return line, nil
	})
	if err != nil {
		return Entry{}, err
	}
	return e, nil
}

func (s *sink) writable() error {
	switch {
	case s.opts.ReadOnly:
		return fmt.Errorf("session: %s: %w", s.path, ErrReadOnly)
	case s.closed:
		return fmt.Errorf("session: %s: closed", s.path)
	case s.fenced != nil:
		return &FencedError{Path: s.path, Cause: s.fenced}
	}
	return nil
}

// fence puts the writer into the fenced state (the first cause is kept)
// and fails the OnDurable callbacks still waiting; the caller holds wmu
// and settles them once it let go of its locks.
func (s *sink) fence(cause error) error {
	if s.fenced == nil {
		s.fenced = cause
		s.waits.fail(&FencedError{Path: s.path, Cause: cause})
	}
	return &FencedError{Path: s.path, Cause: cause}
}

// start enables the group commit; Close stops it.
func (s *sink) start() {
	s.group.window = s.opts.GroupWindow
	if s.group.window <= 0 {
		s.group.window = DefaultGroupWindow
	}
	s.group.flush = func() {
		if err := s.flush(); err != nil {
			s.log.Error("session: group commit", "path", s.path, "err", err)
		}
	}
}

// Flush writes every entry appended before the call and makes it durable
// (creating a deferred file). Appends go on while it waits for the disk.
// The OnDurable callbacks it satisfies, or fails, run before it returns.
func (s *Session) Flush() error { return s.w.flush() }

// Write puts every entry appended before the call into the file without
// waiting for the disk (see SyncWritten); a deferred file is created, which
// is durable. The group commit or Flush makes the lines durable later.
func (s *Session) Write() error { return s.w.write() }

// Close stops the group commit, flushes pending entries (creating a
// deferred file) and closes the file. The OnDurable callbacks run before
// it returns: with nil when the flush made their entries durable, else
// with the failure.
func (s *Session) Close() error {
	err := s.w.close()
	if err == nil && s.opts.Indexes != nil && s.tree.src != nil && !s.kept.Swap(true) {
		size, ok := s.w.closedSize()
		if s.opts.ReadOnly {
			size, ok = s.tree.endOf(), true
		}
		if ok {
			if d := s.tree.detach(size); d != nil {
				if serr := s.opts.Indexes.save(s.tree.src.storage, s.path, d); serr != nil {
					s.log.Warn("session: the index was not saved; the next start reads the file whole", "path", s.path, "err", serr)
				}
				s.opts.Indexes.put(s.path, d)
			}
		}
	}
	return err
}

// closedSize is the size of the file a closed writer left, unless it was
// fenced or never opened the file.
func (s *sink) closedSize() (int64, bool) {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.size, s.fenced == nil && s.size > 0
}

// flush is Session.Flush.
func (s *sink) flush() error {
	s.syncMu.Lock()
	err := s.flushLocked()
	s.syncMu.Unlock()
	s.waits.settle()
	return err
}

// write is Session.Write. It waits for no fsync: a flush holds only
// syncMu while the disk works, so the lines go into the file meanwhile (a
// process crash keeps them; the next fsync makes them durable). A
// deferred file is created by a flush, which makes it durable.
func (s *sink) write() error {
	s.fileMu.Lock()
	_, _, err := s.writeOutLocked(false)
	s.fileMu.Unlock()
	if errors.Is(err, errNoFile) {
		return s.flush()
	}
	s.waits.settle() // a failure fences
	return err
}

// errNoFile: the file is not created yet (Options.DeferCreate).
var errNoFile = errors.New("session: no file yet")

// flushLocked is Flush; the caller holds syncMu. It writes the pending
// lines out under fileMu, then fsyncs without it. Any failure fences the
// writer.
func (s *sink) flushLocked() error {
	s.wmu.Lock()
	upTo, fenced := s.writes, s.fenced
	s.wmu.Unlock()
	switch {
	case upTo <= s.synced:
		return nil
	case fenced != nil:
		return &FencedError{Path: s.path, Cause: fenced}
	}
	s.fileMu.Lock()
	upTo, f, err := s.writeOutLocked(true)
	s.fileMu.Unlock()
	switch {
	case err != nil, upTo <= s.synced: // failed, or created (durable)
		return err
	case f == nil:
		return fmt.Errorf("session: %s: closed", s.path)
	}
	if err := f.Sync(); err != nil {
		// Never retry fsync on the same descriptor (fsyncgate).
		s.wmu.Lock()
		defer s.wmu.Unlock()
		return s.fence(fmt.Errorf("sync: %w", err))
	}
	s.synced = upTo
	s.waits.advance(upTo)
	return nil
}

// writeOutLocked writes the pending lines to the file and returns how many
// appends the file then holds, and the file. The caller holds fileMu; for
// a flush (durable) also syncMu, and then a deferred file is created
// (durably: synced is advanced), else errNoFile is returned for it. Any
// failure fences the writer.
func (s *sink) writeOutLocked(durable bool) (uint64, File, error) {
	s.wmu.Lock()
	upTo, f, fenced, buf := s.writes, s.file, s.fenced, s.pending
	switch {
	case upTo <= s.written:
		s.wmu.Unlock()
		return upTo, f, nil
	case fenced != nil:
		s.wmu.Unlock()
		return 0, nil, &FencedError{Path: s.path, Cause: fenced}
	case f == nil && !durable:
		s.wmu.Unlock()
		return 0, nil, errNoFile
	}
	s.pending = nil
	s.wmu.Unlock()
	fail := func(err error) error {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		return s.fence(err)
	}
	if f == nil {
		if err := s.create(buf); err != nil {
			return 0, nil, fail(fmt.Errorf("create: %w", err))
		}
		s.synced, s.written = upTo, upTo
		s.waits.advance(upTo)
		return upTo, nil, nil
	}
	if len(buf) > 0 {
		size, err := f.Size()
		if err != nil {
			return 0, nil, fail(fmt.Errorf("stat: %w", err))
		}
		if size != s.size {
			return 0, nil, fail(fmt.Errorf("file size %d, expected %d: %w", size, s.size, ErrOtherWriter))
		}
		n, err := f.Write(buf)
		if err != nil || n != len(buf) {
			if err == nil {
				err = fmt.Errorf("short write %d of %d bytes", n, len(buf))
			}
			if terr := f.Truncate(s.size); terr != nil {
				err = errors.Join(err, terr)
			}
			return 0, nil, fail(fmt.Errorf("write: %w", err))
		}
		s.size += int64(n)
	}
	s.written = upTo
	// Written out (File.Write keeps no reference to it): until a flush
	// (an idle session keeps none), the next append fills it again
	// instead of growing a new one.
	var spare []byte
	if !durable && cap(buf) <= keptPending && len(buf) > 0 {
		spare = buf[:0]
	}
	s.wmu.Lock()
	s.spare = spare
	s.wmu.Unlock()
	return upTo, f, nil
}

// create makes the deferred file holding buf, durably (see
// Storage.Create). The caller holds syncMu and fileMu, or owns s alone.
func (s *sink) create(buf []byte) error {
	if s.opts.BeforeCreate != nil {
		if err := s.opts.BeforeCreate(); err != nil {
			return err
		}
	}
	if err := s.storage.MkdirAll(filepath.Dir(s.path)); err != nil {
		return err
	}
	f, err := s.storage.Create(s.path, buf)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	s.file = f
	s.wmu.Unlock()
	s.size = int64(len(buf))
	return nil
}

// close is Session.Close.
func (s *sink) close() error {
	s.wmu.Lock()
	already := s.closed
	s.closed = true
	s.wmu.Unlock()
	if already {
		return nil
	}
	s.group.stop()
	err := s.closeFile()
	s.waits.fail(fmt.Errorf("session: %s: closed", s.path))
	s.waits.settle()
	return err
}

// closeFile flushes (unless the writer is fenced) and closes the file.
func (s *sink) closeFile() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.wmu.Lock()
	fenced := s.fenced
	s.wmu.Unlock()
	var err error
	if fenced == nil {
		err = s.flushLocked()
	}
	s.fileMu.Lock() // no write is using the file
	defer s.fileMu.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.file == nil {
		return err
	}
	if cerr := s.file.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("session: %s: close: %w", s.path, cerr)
	}
	s.file = nil
	return err
}

// knownEntry is e as decodeEntry reads its encoded line back, built
// from e itself, for custom entries: a gateway appends several per reply
// (pibot.reply, pibot.delivery, pibot.head), and indexing each by
// decoding the line it has just encoded cost more than encoding it. nil
// for every other type (Tree.add then decodes as it does for a loaded
// line). Data is compacted as the line is; a value that is not an object
// or an array is left to the decoder.
func knownEntry(e *Entry) *Entry {
	if e.Type != TypeCustom {
		return nil
	}
	var data json.RawMessage
	if e.Data != nil {
		var b bytes.Buffer
		if json.Compact(&b, e.Data) != nil || b.Len() == 0 {
			return nil
		}
		if c := b.Bytes()[0]; c != '{' && c != '[' {
			return nil
		}
		data = b.Bytes()
	}
	return &Entry{Type: TypeCustom, ID: e.ID, ParentID: e.ParentID, Timestamp: e.Timestamp, CustomType: e.CustomType, Data: data}
}

// MoveHead moves loc's head to target without a real message: it appends
// a custom "pibot.head" entry under target carrying pibot.loc.
func (s *Session) MoveHead(loc, target string, sync SyncPolicy) error {
	if _, ok := s.tree.Get(target); !ok {
		return fmt.Errorf("session: %s: move head of %q: entry %s not found", s.path, loc, target)
	}
	_, err := s.Append(Entry{Type: TypeCustom, CustomType: CustomHead, ParentID: target, Pibot: &Meta{Loc: loc}}, sync)
	return err
}

// recordRepair appends one pibot.repair entry when orphans were
// re-attached, unless an earlier repair entry already records the same
// skipped lines.
func (s *Session) recordRepair() error {
	if len(s.report.Reattached) == 0 {
		return nil
	}
	lines := make([]int, 0, len(s.report.SkippedLines))
	for _, l := range s.report.SkippedLines {
		lines = append(lines, l.Line)
	}
	type repairData struct {
		SkippedLines []int             `json:"skippedLines"`
		Reattached   map[string]string `json:"reattached"`
	}
	t := s.tree
	t.mu.RLock()
	recorded := false
	for _, n := range t.nodes {
		if n.typ != TypeCustom || n.ent == nil || n.ent.CustomType != CustomRepair {
			continue
		}
		var d repairData
		if json.Unmarshal(n.ent.Data, &d) == nil && len(d.Reattached) >= len(s.report.Reattached) {
			recorded = true
			for k := range s.report.Reattached {
				if _, ok := d.Reattached[k]; !ok {
					recorded = false
				}
			}
		}
	}
	parent := ""
	if len(t.nodes) > 0 {
		parent = t.nodes[len(t.nodes)-1].id
	}
	t.mu.RUnlock()
	if recorded {
		return nil
	}
	data, _ := json.Marshal(repairData{SkippedLines: lines, Reattached: s.report.Reattached})
	e, err := s.Append(Entry{Type: TypeCustom, CustomType: CustomRepair, Data: data, ParentID: parent}, SyncAlways)
	if err != nil {
		return err
	}
	s.report.RepairEntry = e.ID // Open has not returned: s is not shared yet
	return nil
}
