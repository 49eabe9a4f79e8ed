package sessiontest

import (
	"sync/atomic"
	"syscall"

	"github.com/pibot/pibot/session"
)

// FaultyStorage wraps a session.Storage (session.FileStorage for real
// files): its files count their fsyncs and, while FailSync is set, fail
// them with EIO as a failing disk does. Everything else is the wrapped
// storage's.
type FaultyStorage struct {
	session.Storage
	// Syncs counts the Sync calls of its files.
	Syncs atomic.Int32
	// FailSyncs is how many of the next Sync calls fail (each one that
	// fails counts it down); the ones after succeed.
	FailSyncs atomic.Int32
}

// OpenAppend opens path in the wrapped storage.
func (s *FaultyStorage) OpenAppend(path string) (session.File, error) {
	f, err := s.Storage.OpenAppend(path)
	if err != nil {
		return nil, err
	}
	return faultyFile{File: f, st: s}, nil
}

// Create creates path in the wrapped storage (whose own fsync of the new
// file is not counted and never fails).
func (s *FaultyStorage) Create(path string, data []byte) (session.File, error) {
	f, err := s.Storage.Create(path, data)
	if err != nil {
		return nil, err
	}
	return faultyFile{File: f, st: s}, nil
}

type faultyFile struct {
	session.File
	st *FaultyStorage
}

func (f faultyFile) Sync() error {
	f.st.Syncs.Add(1)
	for {
		n := f.st.FailSyncs.Load()
		if n <= 0 {
			break
		}
		if f.st.FailSyncs.CompareAndSwap(n, n-1) {
			return syscall.EIO
		}
	}
	return f.File.Sync()
}
