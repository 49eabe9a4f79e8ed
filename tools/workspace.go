package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pibot/pibot/tools/sandbox"
)

// Workspace resolves tool paths against a session's working directory and
// decides what each file tool call may reach (see access): pibot's own
// files (data directory, configuration, secret files), /proc, /sys and
// /dev are refused in every mode; a confined call stays inside the
// workspace; an unconfined call sees what a bash command sees (the
// sandbox's layout when the sandbox is active). It also serializes
// mutations of the same file and keeps the workspace's disk quota.
//
// A Workspace is safe for concurrent use. Bind returns a copy that asks
// whose request each call serves.
type Workspace struct {
	root     string // absolute and cleaned
	realRoot string // root with symlinks evaluated
	dir      *os.Root
	home     string
	// only confines every call; others confines the calls that do not
	// serve an owner (owner nil or false).
	only, others bool
	owner        func() bool
	deny         []string // absolute and cleaned, each also with symlinks evaluated
	sb           *sandbox.Sandbox
	allowNet     bool
	// mounts, when not nil, gives the sandbox's further mounts of a call
	// (a git worktree's repository: see Set.At).
	mounts func() ([]sandbox.Mount, error)
	locks  *pathLocks
	quota  *quota
}

// sandboxMounts returns the sandbox's further mounts for one call: none
// when w has none, the sandbox is not active, or they cannot be had now (the call then sees the
// layout without them: less, never more).
func (w *Workspace) sandboxMounts() []sandbox.Mount {
	if w.mounts == nil || w.sb == nil || !w.sb.Active() {
		return nil
	}
	ms, err := w.mounts()
	if err != nil {
		return nil
	}
	return ms
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
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("tools: workspace: %w", err)
	}
	if home == "" {
		home = abs
	}
	w := &Workspace{root: abs, realRoot: real, dir: root, home: home, only: only,
		locks: &pathLocks{m: map[string]*pathLock{}}, quota: &quota{root: real}}
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

// Bind returns a copy of w whose calls serve whom owner says at the time
// of each call: an owner (true) or someone else (false). With non-owners
// confined (Options.NonOwnersWorkspaceOnly), the calls that do not serve
// an owner stay inside the workspace. The copy shares w's locks and
// quota.
func (w *Workspace) Bind(owner func() bool) *Workspace {
	c := *w
	c.owner = owner
	return &c
}

// Root returns the workspace directory.
func (w *Workspace) Root() string { return w.root }

// Confined reports whether a call through w made now would be confined
// to the workspace.
func (w *Workspace) Confined() bool {
	return w.only || w.others && (w.owner == nil || !w.owner())
}

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

// absolute resolves p lexically: expanded, joined to the workspace,
// cleaned. It checks nothing.
func (w *Workspace) absolute(p string) string {
	e := w.expand(p)
	if !filepath.IsAbs(e) {
		e = filepath.Join(w.root, e)
	}
	return filepath.Clean(e)
}

// Resolve returns the absolute path for a tool argument, or the error a
// file tool would give for it now: a denied path, /proc, /sys or /dev, a
// path outside the workspace for a confined call, a path the sandbox
// does not show for an unconfined one.
func (w *Workspace) Resolve(p string) (string, error) {
	return w.call().resolve(p, false)
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

// Inside reports whether abs (an absolute path) stays inside the
// workspace, following symlinks of its existing prefix.
func (w *Workspace) Inside(abs string) bool {
	if !Within(w.root, abs) && !Within(w.realRoot, abs) {
		return false
	}
	real, err := RealPath(abs)
	return err == nil && Within(w.realRoot, real)
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
// dangling symlink is followed to where it points. A link into /proc,
// /sys or /dev is not followed further: the result then lies there (so
// /proc/self/cwd is /proc/self/cwd, not where pibot runs).
func RealPath(abs string) (string, error) {
	todo := strings.Split(abs, "/")
	cur := "/"
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		if kernelPath(next) {
			return filepath.Join(append([]string{next}, todo...)...), nil
		}
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(append([]string{next}, todo...)...), nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > 255 {
			return "", errors.New("too many levels of symbolic links")
		}
		t, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(t) {
			cur = "/"
		}
		todo = append(strings.Split(t, "/"), todo...)
	}
	return cur, nil
}
