package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"
)

// SyncPolicy says when an appended entry becomes durable.
type SyncPolicy int

const (
	// SyncAlways flushes before Append returns.
	SyncAlways SyncPolicy = iota
	// SyncGrouped returns at once; the group commit flushes within
	// GroupWindow. Flush forces it.
	SyncGrouped
	// SyncWritten puts the entry, and every one appended before it, into
	// the file before Append returns, without waiting for the disk: a
	// crash of the process loses none of them, a crash of the machine may
	// until the group commit's fsync. A deferred file is created (durably).
	// It is for records whose loss makes a restarted pibot repeat
	// something visible, such as the note that a reply was delivered.
	SyncWritten
)

// DefaultGroupWindow is the group-commit window of SyncGrouped.
const DefaultGroupWindow = 50 * time.Millisecond

// Options configure Open and Create.
type Options struct {
	// ReadOnly opens without a writer: damage is skipped, never repaired.
	ReadOnly bool
	// Lazy makes Open, on a RangeStorage, stream the file once and keep
	// each entry's envelope and where its line is, not the lines of its
	// messages: a message is read from the file when it is needed (the
	// context from the last compaction, Get, Branch), and checked to be
	// the line that was indexed (ErrFileChanged otherwise). A file that
	// needs repair, migration or the report of damage is loaded whole, as
	// without Lazy. The file's bytes are the same either way.
	Lazy bool
	// Indexes, with Lazy, keeps the index of a lazily opened session when
	// it closes, for the next Open of its file (see Indexes).
	Indexes *Indexes
	// Fence, when non-zero, is written on every entry (cluster mode).
	Fence int64
	// Logger receives repair reports; nil discards.
	Logger *slog.Logger
	// Now replaces time.Now (tests).
	Now func() time.Time
	// GroupWindow overrides DefaultGroupWindow.
	GroupWindow time.Duration
	// DeferCreate makes Create do no I/O: the file is created, with
	// everything appended until then, by the first Flush (the group
	// commit runs one within GroupWindow; Close runs one). Until then a
	// crash leaves no file, so the caller keeps what it appends durable
	// elsewhere (the gateway's inbox holds the user's message).
	DeferCreate bool
	// BeforeCreate, if set, runs before a deferred file is created; an
	// error fails the flush. The gateway makes the location's binding to
	// the file durable there, so no entry of the file is on disk before
	// the binding.
	BeforeCreate func() error
	// EagerCreate, with DeferCreate, starts the group commit that creates
	// the file at once, on its own goroutine, instead of GroupWindow
	// later. Create still does no I/O on the caller's goroutine, and the
	// file (with its fsyncs, and BeforeCreate's) is usually there before
	// the caller's first Write or Flush, which would otherwise create it
	// and wait for them.
	EagerCreate bool
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// ErrFenced is matched (errors.Is) by every *FencedError.
var ErrFenced = errors.New("session writer fenced")

// ErrOtherWriter is matched (errors.Is) by the error of an append that
// found the file changed since this writer's last write: another process
// wrote it (in cluster mode, a replica that took the session over).
var ErrOtherWriter = errors.New("session file changed by another writer")

// ErrReadOnly is returned by writes on a session opened read-only.
var ErrReadOnly = errors.New("session opened read-only")

// FencedError is returned by Append once the writer may no longer write:
// fenced by the cluster, another writer changed the file, or a write or
// sync failed.
type FencedError struct {
	Path  string
	Cause error
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("session: %s: writer fenced: %v", e.Path, e.Cause)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// Unwrap returns the cause.
func (e *FencedError) Unwrap() error { return e.Cause }

// Session is one open session file: it writes the file (appends, flushes,
// fencing, close) and owns the file's Tree, which it extends as it
// appends. Readers hold the Tree (Session.Tree); they may read it while
// one goroutine appends. Appends are serialized.
type Session struct {
	storage Storage
	path    string
	opts    Options
	log     *slog.Logger

	w      *sink  // the file's writing end; it guards itself
	tree   *Tree  // the entries in memory; it guards itself
	report Report // set before Create or Open returns, never changed
	// kept: Close offered the tree to Options.Indexes (once).
	kept atomic.Bool
}

// Create writes a new session file in dir: the header and first entry in
// one write, fsynced together with the directory (at the first Flush with
// Options.DeferCreate). Header fields left empty get defaults (UUIDv7 id,
// current time, version 3). first.ParentID must be "" (it is the first
// entry).
func Create(storage Storage, dir string, h Header, first Entry, opts Options) (*Session, error) {
	now := opts.now()
	h.Type, h.Version = TypeSession, CurrentVersion
	if h.ID == "" {
		h.ID = NewSessionID(now)
	}
	if h.Timestamp == "" {
		h.Timestamp = Timestamp(now)
	}
	path := filepath.Join(dir, FileName(h.Timestamp, h.ID))
	if first.ParentID != "" {
		return nil, fmt.Errorf("session: create %s: first entry has parent %s", path, first.ParentID)
	}
	hb, _ := h.MarshalJSON()
	s := newSession(storage, path, opts)
	s.report.Path, s.report.FromVersion = path, CurrentVersion
	s.tree = newTree(path, h, nil, &s.report)
	line, err := s.prepare(&first)
	if err != nil {
		return nil, err
	}
	w := s.w // not shared yet
	w.pending = append(append(append([]byte(nil), hb...), '\n'), line...)
	w.writes = 1
	s.tree.add(line[:len(line)-1], 2, &first, knownEntry(&first))
	if !opts.DeferCreate {
		if err := w.create(w.pending); err != nil {
			return nil, fmt.Errorf("session: create %s: %w", path, err)
		}
		w.pending, w.synced, w.written = nil, w.writes, w.writes
		w.waits.advance(w.synced)
	}
	w.start()
	switch {
	case opts.DeferCreate && opts.EagerCreate:
		w.group.scheduleIn(0)
	case opts.DeferCreate:
		w.group.schedule()
	}
	return s, nil
}

// CreateFile is Create on the local file system.
func CreateFile(dir string, h Header, first Entry, opts Options) (*Session, error) {
	return Create(FileStorage{}, dir, h, first, opts)
}

// OpenFile is Open on the local file system.
func OpenFile(path string, opts Options) (*Session, error) {
	return Open(FileStorage{}, path, opts)
}

// Open loads a session file. Unless opts.ReadOnly, it also repairs it: a
// torn tail is truncated (a <path>.broken copy is kept), a missing final
// newline is added, a legacy file is migrated and rewritten like pi does,
// a file with damaged entries (see entryDamage) or parent loops is
// rewritten without them (with a copy), and re-attached orphans are
// recorded in one pibot.repair entry.
func Open(storage Storage, path string, opts Options) (*Session, error) {
	if rs, ok := storage.(RangeStorage); ok && opts.Lazy {
		if s, ok, err := openLazy(rs, path, opts); ok || err != nil {
			return s, err
		}
	}
	data, err := storage.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("session: open %s: %w", path, err)
	}
	p, err := parseData(data, path)
	if err != nil {
		return nil, err
	}
	s := newSession(storage, path, opts)
	s.report = p.report
	s.tree = newTree(path, p.header, p.nodes, &s.report)
	if opts.Fence != 0 && opts.Fence < p.maxFence {
		// A newer owner already wrote: this writer is stale from the start.
		s.w.fenced = fmt.Errorf("file has fence %d, writer has %d", p.maxFence, opts.Fence)
		s.w.waits.fail(&FencedError{Path: path, Cause: s.w.fenced})
	}
	if !opts.ReadOnly && s.w.fenced == nil { // only the current owner repairs
		if err := s.repairOnOpen(data, p); err != nil {
			return nil, err
		}
		s.w.start()
	}
	if !s.report.Clean() {
		s.log.Warn("session: damaged file", "path", path, "skipped", len(s.report.SkippedLines),
			"stale", len(s.report.StaleFenced), "tailBytes", s.report.TailBytes, "reattached", len(s.report.Reattached))
	}
	return s, nil
}

func newSession(storage Storage, path string, opts Options) *Session {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Session{storage: storage, path: path, opts: opts, log: log,
		w: &sink{storage: storage, path: path, opts: opts, log: log}}
}

func (s *Session) repairOnOpen(data []byte, p *parsed) error {
	// A loop cut by index, and damaged entries (entryDamage), are
	// rewritten like a migration, with a copy: pi would read them.
	rewrite := p.migrated || len(s.report.Cycles) > 0 || p.damaged > 0
	if p.report.TailBytes > 0 || (rewrite && len(p.report.SkippedLines) > 0) || len(s.report.Cycles) > 0 {
		broken := s.path + ".broken"
		if err := s.storage.WriteFile(broken, data); err != nil {
			return fmt.Errorf("session: %s: keep broken copy: %w", s.path, err)
		}
		s.report.BrokenCopy = broken
	}
	if rewrite {
		var buf bytes.Buffer
		buf.Write(p.headerRaw)
		buf.WriteByte('\n')
		for _, n := range p.nodes {
			raw := n.raw
			if n.parent != nil && n.parent.id != n.parentID {
				// A re-attached orphan: its lost parent's line is gone now.
				raw = withParent(raw, n.parent.id)
			}
			buf.Write(raw)
			buf.WriteByte('\n')
		}
		if err := s.storage.WriteFile(s.path, buf.Bytes()); err != nil {
			return fmt.Errorf("session: %s: rewrite repaired file: %w", s.path, err)
		}
		data = buf.Bytes()
		p.tailOffset = int64(len(data))
		s.report.TailTruncated = p.report.TailBytes > 0
	}
	f, err := s.storage.OpenAppend(s.path)
	if err != nil {
		return fmt.Errorf("session: open %s for append: %w", s.path, err)
	}
	// The writer is not shared yet: it takes the file as repaired here.
	w := s.w
	w.file, w.size = f, int64(len(data))
	if p.tailOffset < int64(len(data)) {
		if err := f.Truncate(p.tailOffset); err != nil {
			_ = f.Close()
			return fmt.Errorf("session: %s:%d: truncate torn tail: %w", s.path, p.report.TailLine, err)
		}
		w.size = p.tailOffset
		s.report.TailTruncated = true
	}
	if w.size > 0 && (p.report.MissingNewline || (p.tailOffset < int64(len(data)) && data[p.tailOffset-1] != '\n')) {
		if _, err := f.Write([]byte{'\n'}); err != nil {
			_ = f.Close()
			return fmt.Errorf("session: %s: add final newline: %w", s.path, err)
		}
		w.size++
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("session: %s: sync: %w", s.path, err)
	}
	return s.recordRepair()
}

// Path returns the file's path.
func (s *Session) Path() string { return s.path }

// Tree returns the session's entries in memory, which is all a reader
// needs; it follows every later Append.
func (s *Session) Tree() *Tree { return s.tree }

// Report returns what loading found and repaired.
func (s *Session) Report() Report {
	r := s.report
	r.SkippedLines = append([]LineError(nil), r.SkippedLines...)
	return r
}

// SetFenced puts the writer into the fenced state: every later Append
// fails with a *FencedError wrapping cause, and so do the OnDurable
// callbacks still waiting (before SetFenced returns).
func (s *Session) SetFenced(cause error) { s.w.setFenced(cause) }

// Fenced returns the error that fenced the writer, or nil.
func (s *Session) Fenced() error { return s.w.fencedErr() }
