package session

import (
	"log/slog"
	"sync"
)

// sink is a session file's writing end: it buffers the lines a Session
// appends, writes them to the file with one write and one fdatasync per
// flush (creating a deferred file), runs the group commit and the
// OnDurable callbacks, and fences itself on a write or sync failure, a
// file another writer changed, or the cluster's word. It knows lines, not
// entries.
type sink struct {
	storage Storage
	path    string
	opts    Options
	log     *slog.Logger

	wmu     sync.Mutex // serializes appends and fencing
	file    File       // nil while the file is deferred (see Options.DeferCreate) and after Close
	pending []byte     // appended lines not yet in the file
	writes  uint64     // appends made
	fenced  error
	closed  bool
	// spare is a pending buffer a Write wrote out, for the next append
	// (keptPending); guarded by wmu. A durable flush drops it: an idle
	// session keeps none.
	spare []byte

	syncMu  sync.Mutex // one Flush at a time (taken before fileMu)
	synced  uint64     // appends known durable; guarded by syncMu
	fileMu  sync.Mutex // one write to the file at a time, not held by an fsync (taken before wmu)
	written uint64     // appends in the file, durable or not; guarded by fileMu
	size    int64      // bytes in the file; guarded by fileMu

	group groupFlush
	// waits are the callbacks of OnDurable.
	waits durableWaits
}

// queue calls line under the lock that serializes appends, once the
// writer may write, and queues the line it returns for the next flush; it
// asks the group commit for one. line may check its entry against every
// one appended before (the Session's tree) and index it: no other append
// runs meanwhile.
func (s *sink) queue(line func() ([]byte, error)) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	b, err := line()
	if err != nil {
		return err
	}
	if s.pending == nil {
		s.pending, s.spare = s.spare, nil
	}
	s.pending = append(s.pending, b...)
	s.writes++
	s.group.schedule()
	return nil
}

// keptPending is the largest pending buffer kept for reuse (sink.spare):
// a run's lines between two writes fit, a long tool output need not stay.
const keptPending = 16 << 10

// setFenced is Session.SetFenced.
func (s *sink) setFenced(cause error) {
	s.wmu.Lock()
	if cause == nil {
		cause = ErrFenced
	}
	_ = s.fence(cause)
	s.wmu.Unlock()
	s.waits.settle()
}

// fencedErr is Session.Fenced.
func (s *sink) fencedErr() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.fenced == nil {
		return nil
	}
	return &FencedError{Path: s.path, Cause: s.fenced}
}
