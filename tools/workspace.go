package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Workspace resolves tool paths against a session's working directory and,
// when confined, refuses paths that leave it. Denied paths (pibot's data
// directory, configuration and secret files) are refused in every mode.
// It also serializes mutations of the same file. A Workspace is safe for
// concurrent use.
type Workspace struct {
	root     string // absolute and cleaned
	realRoot string // root with symlinks evaluated
	home     string
	only     bool
	deny     []string // absolute and cleaned, each also with symlinks evaluated
	locks    pathLocks
}

// NewWorkspace returns a workspace rooted at dir, which must exist. With
// only set, every resolved path must stay inside dir. "~" expands to home;
// an empty home means dir. deny lists files and directories that no path
// may reach, lexically or through a symlink, whether confined or not.
func NewWorkspace(dir, home string, only bool, deny ...string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: workspace: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("tools: workspace: %w", err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("tools: workspace: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("tools: workspace %s: not a directory", abs)
	}
	if home == "" {
		home = abs
	}
	w := &Workspace{root: abs, realRoot: real, home: home, only: only, locks: pathLocks{m: map[string]*pathLock{}}}
	for _, d := range deny {
		if d == "" {
			continue
		}
		d, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("tools: denied path: %w", err)
		}
		w.deny = append(w.deny, d)
		if r, err := RealPath(d); err == nil && r != d {
			w.deny = append(w.deny, r)
		}
	}
	return w, nil
}

// Root returns the workspace directory.
func (w *Workspace) Root() string { return w.root }

// Confined reports whether paths must stay inside the workspace.
func (w *Workspace) Confined() bool { return w.only }

// expand applies pi's path normalisation: a leading "@" is dropped,
// Unicode spaces become ASCII spaces and "~" means the home directory.
func (w *Workspace) expand(p string) string {
	p = strings.TrimPrefix(p, "@")
	p = strings.Map(func(r rune) rune {
		if r == 0xA0 || (r >= 0x2000 && r <= 0x200A) || r == 0x202F || r == 0x205F || r == 0x3000 {
			return ' '
		}
		return r
	}, p)
	switch {
	case p == "~":
		return w.home
	case strings.HasPrefix(p, "~/"):
		return w.home + p[1:]
	}
	return p
}

// Resolve returns the absolute path for a tool argument. With confinement
// on, a path that leaves the workspace, lexically or through a symlink, is
// an error.
func (w *Workspace) Resolve(p string) (string, error) {
	e := w.expand(p)
	abs := e
	if !filepath.IsAbs(e) {
		abs = filepath.Join(w.root, e)
	}
	abs = filepath.Clean(abs)
	if err := w.checkDenied(p, abs); err != nil {
		return "", err
	}
	if !w.only {
		return abs, nil
	}
	if err := w.check(p, abs); err != nil {
		return "", err
	}
	return abs, nil
}

// checkDenied refuses abs when it is a denied path or below one,
// lexically or once the symlinks of its existing prefix are followed.
func (w *Workspace) checkDenied(orig, abs string) error {
	if len(w.deny) == 0 {
		return nil
	}
	if w.denied(abs) {
		return deniedError(orig)
	}
	if real, err := RealPath(abs); err == nil && w.denied(real) {
		return deniedError(orig)
	}
	return nil
}

// denied reports whether the clean absolute path p is a denied path or
// below one, without looking at the file system.
func (w *Workspace) denied(p string) bool {
	for _, d := range w.deny {
		if Within(d, p) {
			return true
		}
	}
	return false
}

func deniedError(p string) error {
	return failf("Path %s is pibot's own data (data_dir, the configuration file or a secret file). Tools never access it.", p)
}

// Inside reports whether abs (an absolute path) stays inside the
// workspace, following symlinks of its existing prefix.
func (w *Workspace) Inside(abs string) bool {
	return w.check(abs, abs) == nil
}

func (w *Workspace) check(orig, abs string) error {
	if !Within(w.root, abs) && !Within(w.realRoot, abs) {
		return outsideError(orig)
	}
	real, err := RealPath(abs)
	if err != nil {
		return &Error{Text: fmt.Sprintf("Cannot resolve path %s: %v", orig, err), Err: err}
	}
	if !Within(w.realRoot, real) {
		return outsideError(orig)
	}
	return nil
}

func outsideError(p string) error {
	return failf("Path %s is outside the workspace. Only files inside the workspace can be accessed (agent.workspace_only is enabled).", p)
}

// Within reports whether p is root or below it (both clean and absolute).
func Within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel))
}

// RealPath evaluates the symlinks of the longest existing prefix of abs
// (an absolute, clean path) and appends the rest, so a path to a file yet
// to be created is checked through the directories that do exist; a
// dangling symlink is followed to where it points.
func RealPath(abs string) (string, error) {
	var rest []string
	cur := abs
	for i := 0; i < 255; i++ {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			for j := len(rest) - 1; j >= 0; j-- {
				r = filepath.Join(r, rest[j])
			}
			return r, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			// A dangling symlink: follow its target lexically.
			if t, lerr := os.Readlink(cur); lerr == nil {
				if !filepath.IsAbs(t) {
					t = filepath.Join(filepath.Dir(cur), t)
				}
				cur = filepath.Clean(t)
				continue
			}
			return "", err
		}
		if t, lerr := os.Readlink(cur); lerr == nil {
			if !filepath.IsAbs(t) {
				t = filepath.Join(filepath.Dir(cur), t)
			}
			cur = filepath.Clean(t)
			continue
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
	return "", errors.New("too many levels of symbolic links")
}

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
	l := &w.locks
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

// checkOpened is the second deny check, after Resolve: it refuses the
// open file f when the path the kernel resolved while opening it is
// denied, so that a symlink swapped in after Resolve (by a command running
// alongside) gains nothing. Without /proc it relies on Resolve alone.
func (w *Workspace) checkOpened(f *os.File, orig string) error {
	if len(w.deny) == 0 {
		return nil
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil || !w.denied(real) {
		return nil
	}
	f.Close()
	return deniedError(orig)
}

// readFile reads abs (orig as the tool was given it) with checkOpened.
func (w *Workspace) readFile(abs, orig string) ([]byte, error) {
	f, err := os.Open(abs)
	if err != nil {
		return nil, nodeError(err, "read", abs)
	}
	if err := w.checkOpened(f, orig); err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nodeError(err, "read", abs)
	}
	return data, nil
}

// writeFile is os.WriteFile with checkOpened: the file is truncated only
// once the check passed.
func (w *Workspace) writeFile(abs, orig string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE, perm)
	if err != nil {
		return nodeError(err, "open", abs)
	}
	if err := w.checkOpened(f, orig); err != nil {
		return err
	}
	if st, serr := f.Stat(); serr == nil && st.Mode().IsRegular() {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nodeError(err, "write", abs)
	}
	return nil
}
