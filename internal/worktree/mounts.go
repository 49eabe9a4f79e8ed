package worktree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pibot/pibot/internal/atomicfile"
)

// Mount is a path of the repository that git in a sandboxed command needs
// to work in one of its worktrees, shown at its own path: read-write, or
// read-only (a file or directory inside one shown read-write stays
// read-only: the innermost mount decides).
type Mount struct {
	Path  string
	Write bool
}

// Mounts returns what a sandbox (tools/sandbox: bubblewrap) shows of the
// repository, beside the worktree at path itself, so that git works there
// (status, add, commit, diff, log on the worktree's branch) while nothing
// the agent writes is code that pibot or the repository's user later
// runs:
//
//   - the common git directory read-only: its configuration (hooks path,
//     fsmonitor, filter and diff drivers, aliases), hooks, info/
//     (attributes, exclude), packed-refs, HEAD and index of the main
//     checkout, the other worktrees' administrative directories;
//   - objects/ read-write for new objects, its pack/ and info/ (packs,
//     alternates, commit graph) read-only;
//   - refs/heads/pibot/ and its reflogs read-write: branches pibot made,
//     never the repository's others;
//   - the worktree's administrative directory read-write (HEAD, index,
//     logs), with its commondir, gitdir and config.worktree read-only
//     (made empty when missing), so no configuration comes in that way
//     and the repository's map of its worktrees stays as it is;
//   - the worktree's own .git file read-only, so it keeps naming the
//     worktree's administrative directory.
//
// The main checkout's files are not shown. Mounts makes the directories
// and the empty config.worktree it names when they are missing; every
// path it returns exists. Paths are found from the repository's side,
// never from the worktree's .git file.
func (m *Manager) Mounts(path string) ([]Mount, error) {
	gd, err := m.adminDir(path)
	if err != nil {
		return nil, err
	}
	c := m.common
	branches := strings.TrimSuffix(Prefix, "/")
	dirs := []Mount{
		{Path: c},
		{Path: filepath.Join(c, "objects"), Write: true},
		{Path: filepath.Join(c, "objects", "pack")},
		{Path: filepath.Join(c, "objects", "info")},
		{Path: filepath.Join(c, "refs", "heads", branches), Write: true},
		{Path: filepath.Join(c, "logs", "refs", "heads", branches), Write: true},
		{Path: gd, Write: true},
	}
	for _, d := range dirs[1:] {
		if err := os.MkdirAll(d.Path, 0o755); err != nil {
			return nil, fmt.Errorf("worktree: mounts: %w", err)
		}
	}
	wtConfig := filepath.Join(gd, "config.worktree")
	f, err := os.OpenFile(wtConfig, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	switch {
	case err == nil:
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("worktree: mounts: %w", err)
		}
	case !errors.Is(err, os.ErrExist):
		return nil, fmt.Errorf("worktree: mounts: %w", err)
	}
	// The .git file is the agent's to rewrite outside a sandbox (the file
	// tools): put back what git wrote there, so that git in the sandbox,
	// and the user's git later, works on this worktree's repository.
	dotGit := filepath.Join(path, ".git")
	want := "gitdir: " + gd + "\n"
	if b, err := os.ReadFile(dotGit); err != nil || string(b) != want {
		if err := atomicfile.Write(dotGit, []byte(want)); err != nil {
			return nil, fmt.Errorf("worktree: mounts: %w", err)
		}
	}
	files := []Mount{
		{Path: filepath.Join(gd, "commondir")},
		{Path: filepath.Join(gd, "gitdir")},
		{Path: wtConfig},
		{Path: dotGit},
	}
	for _, f := range files {
		st, err := os.Lstat(f.Path)
		if err != nil {
			return nil, fmt.Errorf("worktree: mounts: %w", err)
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("worktree: mounts: %s is not a regular file", f.Path)
		}
	}
	return append(dirs, files...), nil
}
