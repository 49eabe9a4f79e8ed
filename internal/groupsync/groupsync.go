// Package groupsync appends to a file durably with group commit: callers
// that need their write on disk at the same time share one fsync instead
// of queueing one each behind a lock.
package groupsync

import (
	"os"
	"sync"
)

// File appends to an *os.File. It is safe for concurrent use.
type File struct {
	mu      sync.Mutex
	f       *os.File
	written uint64 // writes done

	syncMu sync.Mutex
	synced uint64 // writes known durable
}

// New wraps f, an open file in append mode.
func New(f *os.File) *File { return &File{f: f} }

// Write appends b (one write call) without waiting for the disk.
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
// durable, so the caller can work while the fsync runs.
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
	if g.f == nil {
		return 0, os.ErrClosed
	}
	if _, err := g.f.Write(b); err != nil {
		return 0, err
	}
	g.written++
	return g.written, nil
}

// syncThrough returns once write n is durable. Callers arriving while an
// fsync runs wait for it and then share the next one.
func (g *File) syncThrough(n uint64) error {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	if g.synced >= n {
		return nil
	}
	g.mu.Lock()
	upTo, f := g.written, g.f
	g.mu.Unlock()
	if f == nil {
		return os.ErrClosed
	}
	if err := f.Sync(); err != nil {
		return err
	}
	g.synced = upTo
	return nil
}

// Close closes the file.
func (g *File) Close() error {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.f == nil {
		return nil
	}
	err := g.f.Close()
	g.f = nil
	return err
}
