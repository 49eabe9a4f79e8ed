// Package groupsync appends to a file durably with group commit: writes
// are gathered in memory, and callers that need them on disk share one
// write and one fsync instead of queueing a syscall each behind a lock.
package groupsync

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// File appends to an *os.File. It is safe for concurrent use. Writes are
// buffered: they reach the file at the next Sync (or WriteSync, a wait
// from WriteAsync, Close), so a writer never waits for the disk unless it
// asks to.
type File struct {
	mu      sync.Mutex
	f       *os.File
	buf     []byte // writes not yet in the file
	written uint64 // writes accepted
	err     error  // the first failed write or sync; every later call fails

	syncMu sync.Mutex
	synced uint64 // writes known durable
}

// New wraps f, an open file in append mode.
func New(f *os.File) *File { return &File{f: f} }

// Write appends b without waiting for the disk. b reaches the file with
// the next sync; if that fails, b may be lost.
func (g *File) Write(b []byte) error {
	_, err := g.write(b)
	return err
}

// WriteSync appends b and returns once it is durable.
func (g *File) WriteSync(b []byte) error {
	wait, err := g.WriteAsync(b)
	if err != nil {
		return err
	}
	return wait()
}

// WriteAsync appends b and returns a function that waits until b is
// durable, so the caller can work before it waits.
func (g *File) WriteAsync(b []byte) (wait func() error, err error) {
	n, err := g.write(b)
	if err != nil {
		return nil, err
	}
	return func() error { return g.syncThrough(n) }, nil
}

// Sync returns once every write made before it is durable; it costs
// nothing when they already are.
func (g *File) Sync() error {
	g.mu.Lock()
	n := g.written
	g.mu.Unlock()
	return g.syncThrough(n)
}

func (g *File) write(b []byte) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.f == nil:
		return 0, os.ErrClosed
	case g.err != nil:
		return 0, g.err
	}
	g.buf = append(g.buf, b...)
	g.written++
	return g.written, nil
}

// Flush writes what is buffered to the file without waiting for the disk:
// a process crash then keeps it, a power loss may not.
func (g *File) Flush() error {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	_, err := g.writeOut()
	return err
}

// syncThrough returns once write n is durable. Callers arriving while a
// sync runs wait for it and then share the next one.
func (g *File) syncThrough(n uint64) error {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	if g.synced >= n {
		return nil
	}
	return g.flushLocked()
}

// flushLocked writes the buffer and syncs the file. The caller holds syncMu.
func (g *File) flushLocked() error {
	upTo, err := g.writeOut()
	if err != nil {
		return err
	}
	// fdatasync: an append-only log needs its data and size on disk, not
	// its timestamps.
	if err := unix.Fdatasync(int(g.f.Fd())); err != nil {
		return g.fail(err)
	}
	g.synced = upTo
	return nil
}

// writeOut writes the buffer with one write and returns how many writes
// are then in the file. The caller holds syncMu (so g.f stays open).
func (g *File) writeOut() (upTo uint64, err error) {
	g.mu.Lock()
	data, upTo, f, err := g.buf, g.written, g.f, g.err
	g.buf = nil
	g.mu.Unlock()
	switch {
	case err != nil:
		return 0, err
	case f == nil:
		return 0, os.ErrClosed
	case len(data) == 0:
		return upTo, nil
	}
	if _, err := f.Write(data); err != nil {
		return 0, g.fail(err)
	}
	return upTo, nil
}

// fail poisons the file: after a failed write or sync every later call
// fails, never retrying on the same descriptor (fsyncgate).
func (g *File) fail(err error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.err = err
	return err
}

// Close writes and syncs what is buffered, then closes the file.
func (g *File) Close() error {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	g.mu.Lock()
	f, pending := g.f, g.written > g.synced
	g.mu.Unlock()
	if f == nil {
		return nil
	}
	var err error
	if pending {
		err = g.flushLocked()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if cerr := g.f.Close(); err == nil {
		err = cerr
	}
	g.f = nil
	return err
}
