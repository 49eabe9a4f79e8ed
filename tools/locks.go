package tools

import (
	"context"
	"sync"
)

// pathLocks serializes mutations per real path.
type pathLocks struct {
	mu sync.Mutex
	m  map[string]*pathLock
}

type pathLock struct {
	sem  chan struct{}
	refs int
}

// lock waits for the file's mutation lock and returns its release.
func (w *Workspace) lock(ctx context.Context, abs string) (func(), error) {
	key := abs
	if r, err := RealPath(abs); err == nil {
		key = r
	}
	l := w.locks
	l.mu.Lock()
	e := l.m[key]
	if e == nil {
		e = &pathLock{sem: make(chan struct{}, 1)}
		l.m[key] = e
	}
	e.refs++
	l.mu.Unlock()
	drop := func() {
		l.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
	select {
	case e.sem <- struct{}{}:
		return func() { <-e.sem; drop() }, nil
	case <-ctx.Done():
		drop()
		return nil, errAborted
	}
}
