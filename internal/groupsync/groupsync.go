// Package groupsync appends to a file durably with group commit: writes
// are gathered in memory, and callers that need them on disk share one
// write and one fsync instead of queueing a syscall each behind a lock.
//
// A failed write or fsync poisons the file (fsyncgate: a failed fsync is
// never retried on the same descriptor). The next call after at least
// RetryInterval recovers it: the file is opened again, cut back to what
// the last successful fsync made durable, and everything written since is
// written again and synced. So a full disk costs failed calls while it
// lasts, never a restart.
package groupsync

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pibot/pibot/internal/fsync"
)

// RetryInterval is the least time between two attempts to recover a
// poisoned file.
const RetryInterval = 200 * time.Millisecond

// File appends to an *os.File. It is safe for concurrent use. Writes are
// buffered: they reach the file at the next Sync (or WriteSync, a wait
// from WriteAsync, Close), so a writer never waits for the disk unless it
// asks to.
type File struct {
	mu     sync.Mutex
	f      *os.File
	path   string
	pend   pending // writes not yet in the file
	err    error   // the failure that poisoned the file; nil when healthy
	failed time.Time

	syncMu     sync.Mutex
	synced     atomic.Uint64 // writes known durable; stored under syncMu
	syncedSize int64         // bytes of the file known durable
	inFile     []byte        // bytes written to the file since the last fsync
	// flushWanted: a Flush found syncMu held; whoever lets go of it
	// writes the buffer out first (unlockSync).
	flushWanted atomic.Bool
}

// New wraps f, an open file in append mode (opened by name, so it can be
// opened again to recover from a failed write).
func New(f *os.File) *File { return NewNamed(f, f.Name()) }

// NewNamed is New for a file opened in append mode under another name
// than path, which it is opened by to recover (a file renamed to path
// after it was opened: atomicfile.WriteOpen).
func NewNamed(f *os.File, path string) *File {
	g := &File{f: f, path: path}
	if st, err := f.Stat(); err == nil {
		g.syncedSize = st.Size()
	}
	return g
}

// Write appends b without waiting for the disk. b reaches the file with
// the next sync; if that fails, b is written again when the file recovers.
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
// nothing, and waits for no other caller's fsync, when they already are.
// On a poisoned file it tries to recover.
func (g *File) Sync() error {
	g.mu.Lock()
	n := g.pend.written
	g.mu.Unlock()
	return g.syncThrough(n)
}

// Err returns the failure that poisoned the file, nil when it is healthy.
func (g *File) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *File) write(b []byte) (uint64, error) {
	g.mu.Lock()
	f, err := g.f, g.err
	g.mu.Unlock()
	switch {
	case f == nil:
		return 0, os.ErrClosed
	case err != nil:
		// Refuse new writes until the file has recovered.
		g.syncMu.Lock()
		err = g.recoverLocked()
		g.unlockSync()
		if err != nil {
			return 0, err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.f == nil:
		return 0, os.ErrClosed
	case g.err != nil:
		return 0, g.err
	}
	return g.pend.add(b), nil
}

// Flush writes what is buffered to the file without waiting for the disk:
// a process crash then keeps it, a power loss may not. It never waits for
// an fsync: while one runs, its caller writes the buffer out as soon as
// the fsync returns, so a process crash during that fsync may lose what
// Flush was asked to write.
func (g *File) Flush() error {
	g.flushWanted.Store(true)
	if !g.syncMu.TryLock() {
		return nil // the holder writes it out as it lets go (unlockSync)
	}
	defer g.unlockSync()
	g.flushWanted.Store(false)
	if err := g.recoverLocked(); err != nil {
		return err
	}
	_, err := g.writeOut()
	return err
}

// unlockSync lets go of syncMu, first writing the buffer out for every
// Flush that found syncMu held meanwhile. A failed write poisons the file,
// which the next call reports.
func (g *File) unlockSync() {
	for {
		g.syncMu.Unlock()
		if !g.flushWanted.Load() || !g.syncMu.TryLock() {
			return // no Flush waits, or the new holder sees the flag
		}
		if g.flushWanted.Swap(false) && g.recoverLocked() == nil {
			_, _ = g.writeOut()
		}
	}
}

// syncThrough returns once write n is durable. Callers arriving while a
// sync runs wait for it and then share the next one; a caller whose write
// is durable already waits for nobody.
func (g *File) syncThrough(n uint64) error {
	if g.synced.Load() >= n {
		return nil
	}
	g.syncMu.Lock()
	defer g.unlockSync()
	if g.synced.Load() >= n {
		return nil
	}
	if err := g.recoverLocked(); err != nil {
		return err
	}
	if g.synced.Load() >= n {
		return nil // the recovery synced it
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
	if err := fsync.Data(g.f); err != nil {
		return g.fail(fmt.Errorf("fdatasync %s: %w", g.path, err))
	}
	g.synced.Store(upTo)
	g.syncedSize += int64(len(g.inFile))
	g.inFile = g.inFile[:0]
	return nil
}

// writeOut writes the buffer with one write and returns how many writes
// are then in the file. The caller holds syncMu (so g.f stays open).
func (g *File) writeOut() (upTo uint64, err error) {
	g.mu.Lock()
	data, upTo := g.pend.take()
	f, err := g.f, g.err
	g.mu.Unlock()
	switch {
	case err != nil:
		if len(data) > 0 {
			g.mu.Lock()
			g.pend.unwrite(data)
			g.mu.Unlock()
		}
		return 0, err
	case f == nil:
		return 0, os.ErrClosed
	case len(data) == 0:
		return upTo, nil
	}
	// Kept until synced: after a failure it is written again.
	g.inFile = append(g.inFile, data...)
	if _, err := f.Write(data); err != nil {
		return 0, g.fail(fmt.Errorf("write %s: %w", g.path, err))
	}
	if cap(data) <= keptBuffer {
		g.mu.Lock()
		g.pend.reuse(data)
		g.mu.Unlock()
	}
	return upTo, nil
}

// fail poisons the file: after a failed write or sync no call uses the
// descriptor again; the next one after RetryInterval recovers the file.
func (g *File) fail(err error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = err
	}
	g.failed = time.Now()
	return err
}

// recoverLocked brings a poisoned file back: it opens the file again,
// cuts it to its durable size, writes everything since then again and
// syncs it. It returns nil on a healthy file, the poisoning error when the
// last attempt was less than RetryInterval ago or the attempt fails. The
// caller holds syncMu.
func (g *File) recoverLocked() error {
	g.mu.Lock()
	err, failed, old := g.err, g.failed, g.f
	g.mu.Unlock()
	if err == nil || old == nil {
		return err
	}
	if time.Since(failed) < RetryInterval {
		return err
	}
	f, oerr := os.OpenFile(g.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if oerr != nil {
		return g.fail(fmt.Errorf("%w (recovering: %v)", err, oerr))
	}
	g.mu.Lock()
	buf, upTo := g.pend.take()
	g.mu.Unlock()
	data := append(g.inFile, buf...)
	werr := f.Truncate(g.syncedSize)
	if werr == nil && len(data) > 0 {
		_, werr = f.Write(data)
	}
	if werr == nil {
		werr = fsync.Data(f)
	}
	if werr != nil {
		_ = f.Close()
		g.inFile = data
		g.mu.Lock()
		g.failed = time.Now()
		g.mu.Unlock()
		return fmt.Errorf("%w (recovering: %v)", err, werr)
	}
	_ = old.Close()
	g.mu.Lock()
	g.f, g.err = f, nil
	g.mu.Unlock()
	g.synced.Store(upTo)
	g.syncedSize += int64(len(data))
	g.inFile = g.inFile[:0]
	return nil
}

// Close writes and syncs what is buffered, then closes the file.
func (g *File) Close() error {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	g.mu.Lock()
	f, unsynced, poisoned := g.f, g.pend.written > g.synced.Load(), g.err != nil
	g.mu.Unlock()
	if f == nil {
		return nil
	}
	var err error
	if poisoned {
		err = g.recoverLocked()
	}
	if unsynced && err == nil {
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
