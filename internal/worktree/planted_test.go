package worktree_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// planted is a program the agent might plant: it leaves a mark when run,
// and prints its input (a filter driver's duty) so git goes on.
func planted(t *testing.T) (prog, mark string) {
	t.Helper()
	d := t.TempDir()
	mark = filepath.Join(d, "ran")
	prog = filepath.Join(d, "planted.sh")
	write(t, prog, "#!/bin/sh\necho \"$0 $*\" >> "+mark+"\ncat\n")
	if err := os.Chmod(prog, 0o755); err != nil {
		t.Fatal(err)
	}
	return prog, mark
}

// ran reports whether the planted program ran, and forgets it.
func ran(mark string) bool {
	_, err := os.Stat(mark)
	os.Remove(mark)
	return err == nil
}

// gitPlain runs git in dir as a user would, with none of pibot's
// precautions: what proves an attack live before pibot is tried on it.
func gitPlain(dir string, args ...string) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	_ = cmd.Run()
}

// A worktree's own configuration (config.worktree, read when the
// repository sets extensions.worktreeConfig) that names a hooks path and
// an fsmonitor program changes nothing pibot's git does: each of pibot's
// calls (State, Diff, Open again, Prune) runs neither.
func TestPibotGitIgnoresAWorktreesConfig(t *testing.T) {
	dir := repo(t)
	git(t, dir, "config", "extensions.worktreeConfig", "true")
	m := manager(t, dir)
	ctx := t.Context()
	a, err := m.Create(ctx, "pibot/a", "", "")
	if err != nil {
		t.Fatal(err)
	}
	prog, mark := planted(t)
	hooks := t.TempDir()
	for _, h := range []string{"post-checkout", "pre-commit", "post-index-change", "reference-transaction"} {
		write(t, filepath.Join(hooks, h), "#!/bin/sh\n"+prog+" "+h+" </dev/null\n")
		if err := os.Chmod(filepath.Join(hooks, h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gd := strings.TrimSpace(strings.TrimPrefix(readFile(t, filepath.Join(a.Path, ".git")), "gitdir:"))
	write(t, filepath.Join(gd, "config.worktree"), "[core]\n\thooksPath = "+hooks+"\n\tfsmonitor = "+prog+"\n")
	write(t, filepath.Join(a.Path, "x.txt"), "x\n")
	gitPlain(a.Path, "status")
	if !ran(mark) {
		t.Fatal("plain git status did not run the planted fsmonitor: the test proves nothing here")
	}
	if _, dirty, err := m.State(ctx, a); err != nil || !dirty {
		t.Fatalf("State: dirty=%v err=%v", dirty, err)
	}
	if d, err := m.Diff(ctx, a, 0); err != nil || !strings.Contains(d.Patch, "+x") {
		t.Fatalf("Diff: %+v %v", d, err)
	}
	if ran(mark) {
		t.Fatal("pibot's State or Diff ran a program the worktree's config names")
	}
	os.Remove(filepath.Join(a.Path, "x.txt"))
	if gone, err := m.Prune(ctx, time.Hour, time.Now().Add(2*time.Hour)); err != nil || len(gone) != 1 {
		t.Fatalf("prune: %v %v", gone, err)
	}
	if again, err := m.Open(ctx, a); err != nil || !again {
		t.Fatalf("Open: %v %v", again, err)
	}
	if ran(mark) {
		t.Fatal("pibot's Prune or Open ran a program the worktree's config names")
	}
}

// A submodule the agent checks out in its worktree, with a filter driver
// in its own configuration and a file the driver would clean: git status
// looking inside the submodule runs the driver; pibot's State and Diff
// do not look inside.
func TestPibotGitStaysOutOfSubmodules(t *testing.T) {
	dir := repo(t)
	m := manager(t, dir)
	ctx := t.Context()
	a, err := m.Create(ctx, "pibot/a", "", "")
	if err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(a.Path, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, sub, "init", "-q")
	write(t, filepath.Join(sub, "f.txt"), "one\n")
	git(t, sub, "add", "f.txt")
	git(t, sub, "commit", "-q", "-m", "sub")
	git(t, a.Path, "add", "sub")
	prog, mark := planted(t)
	git(t, sub, "config", "filter.planted.clean", prog)
	write(t, filepath.Join(sub, ".gitattributes"), "* filter=planted\n")
	write(t, filepath.Join(sub, "f.txt"), "two\n")
	gitPlain(a.Path, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "status", "--porcelain", "--ignore-submodules=none")
	if !ran(mark) {
		t.Fatal("git status into the submodule did not run its filter: the test proves nothing here")
	}
	if _, dirty, err := m.State(ctx, a); err != nil || !dirty {
		t.Fatalf("State: dirty=%v err=%v (the new submodule is a change)", dirty, err)
	}
	if ran(mark) {
		t.Fatal("pibot's State ran the submodule's filter")
	}
	if _, err := m.Diff(ctx, a, 0); err != nil {
		t.Fatal(err)
	}
	if ran(mark) {
		t.Fatal("pibot's Diff ran the submodule's filter")
	}
	// Committed, the submodule is no change to pibot: Prune tries to
	// remove the worktree, which git refuses with a submodule in it.
	git(t, a.Path, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "sub")
	ran(mark)
	if _, dirty, err := m.State(ctx, a); err != nil || dirty {
		t.Fatalf("State after the commit: dirty=%v err=%v", dirty, err)
	}
	if gone, err := m.Prune(ctx, time.Hour, time.Now().Add(2*time.Hour)); len(gone) != 0 {
		t.Fatalf("prune removed a worktree with a submodule: %v %v", gone, err)
	}
	if ran(mark) {
		t.Fatal("pibot's Prune ran the submodule's filter")
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
