package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/pibot/pibot/internal/atomicfile"
)

// ErrLeaseHeld means another holder has the key.
var ErrLeaseHeld = errors.New("lease held by another owner")

// Lease is the right to write one session. Its fence increases with every
// grant so storage can refuse a stale writer; Done is closed when the lease
// is lost or released. The local Locker and a Redis locker both grant it.
type Lease interface {
	Fence() int64
	Done() <-chan struct{}
	// Release gives the lease back; it is safe to call more than once.
	Release(ctx context.Context) error
}

// localLease is a lease of the in-process Locker.
type localLease struct {
	key   string
	fence int64

	l    *LocalLocker
	done chan struct{}
	once sync.Once
}

// Fence returns the fencing token of this grant.
func (le *localLease) Fence() int64 { return le.fence }

// Done is closed when the lease is released (a local lease is never lost).
func (le *localLease) Done() <-chan struct{} { return le.done }

// Permanent reports that the lease is never lost, only released: holders
// need not watch Done.
func (le *localLease) Permanent() bool { return true }

// Release gives the lease back. It is safe to call more than once.
func (le *localLease) Release(context.Context) error {
	le.once.Do(func() {
		le.l.mu.Lock()
		if le.l.held[le.key] == le {
			delete(le.l.held, le.key)
		}
		le.l.mu.Unlock()
		close(le.done)
	})
	return nil
}

// LocalLocker grants in-process leases. Fences come from a counter file in the
// data directory, bumped once per process start, so fences keep growing
// across restarts exactly as in cluster mode. The data directory lock
// (LockDir) keeps every other process out, so a fence of this process's
// epoch in a file was written by this process.
type LocalLocker struct {
	mu    sync.Mutex
	path  string // the counter file
	held  map[string]*localLease
	epoch int64
}

// NewLocker reads and bumps <dir>/fence (created if missing).
func NewLocker(dir string) (*LocalLocker, error) {
	p := filepath.Join(dir, "fence")
	var n int64
	if b, err := os.ReadFile(p); err == nil {
		n, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cluster: %s: not a number: %w", p, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cluster: read fence: %w", err)
	}
	n++
	if err := atomicfile.Write(p, []byte(strconv.FormatInt(n, 10)+"\n")); err != nil {
		return nil, fmt.Errorf("cluster: write fence: %w", err)
	}
	return &LocalLocker{path: p, held: map[string]*localLease{}, epoch: n}, nil
}

// Acquire grants key's lease or returns ErrLeaseHeld. minFence is the
// highest fence already seen in the session file. The grant carries this
// process's epoch: a file holding it was written by this process, which
// may go on. A file holding a higher fence (the counter file was lost or
// copied back) raises the epoch, durably, above it.
func (l *LocalLocker) Acquire(_ context.Context, key string, minFence int64) (Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.held[key]; ok {
		return nil, fmt.Errorf("cluster: %s: %w", key, ErrLeaseHeld)
	}
	if minFence > l.epoch {
		if err := atomicfile.Write(l.path, []byte(strconv.FormatInt(minFence+1, 10)+"\n")); err != nil {
			return nil, fmt.Errorf("cluster: raise fence: %w", err)
		}
		l.epoch = minFence + 1
	}
	le := &localLease{key: key, fence: l.epoch, l: l, done: make(chan struct{})}
	l.held[key] = le
	return le, nil
}
