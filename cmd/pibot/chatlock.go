package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/config"
)

// lockForSession takes, for `pibot chat -p --session FILE`, the lock
// `pibot serve` holds while it runs: the data directory's instance lock,
// when FILE is inside the data directory. A session serve may be writing
// is refused with a clear error instead of being written by two processes
// (which ran a tool twice). unlock must be called when done.
func lockForSession(cfg config.Config, path string) (unlock func(), err error) {
	if !within(cfg.DataDir, path) {
		return func() {}, nil
	}
	lock, err := cluster.LockDir(cfg.DataDir)
	if errors.Is(err, cluster.ErrLocked) {
		pid, _ := os.ReadFile(dataPath(cfg, ".pibot.lock"))
		return nil, fmt.Errorf("chat: session %s belongs to the pibot running on data directory %s (pid %s), which may be writing it; "+
			"continue the conversation in its chat, stop it first, or fork the session (`pibot session fork`) and continue the copy",
			path, cfg.DataDir, strings.TrimSpace(string(pid)))
	}
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return func() { _ = lock.Unlock() }, nil
}

// within reports whether path is inside dir, after resolving both to
// absolute paths with symbolic links followed.
func within(dir, path string) bool {
	real := func(p string) string {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return p
	}
	rel, err := filepath.Rel(real(dir), real(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
