package worktree_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/internal/worktree"
)

// git runs git in dir for the test's setup and checks.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// repo makes a repository with one commit of main.txt.
func repo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(dir, "main.txt"), "one\n")
	git(t, dir, "add", "main.txt")
	git(t, dir, "commit", "-q", "-m", "first")
	return dir
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func manager(t *testing.T, dir string) *worktree.Manager {
	t.Helper()
	m, err := worktree.New(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestName(t *testing.T) {
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"slack", "C0WEB", "1700000000.123456"}, "pibot/slack-C0WEB-1700000000-123456"},
		{[]string{"web", "../../etc", "x"}, "pibot/web-etc-x"},                   // no path steps
		{[]string{"-rf", "--force"}, "pibot/rf-force"},                           // no option
		{[]string{"a..b", "c.lock", "@{u}"}, "pibot/a-b-c-lock-u"},               // git's ref rules
		{[]string{"", "🙂", "~^:?*[\\"}, "pibot/thread"},                          // nothing left
		{[]string{strings.Repeat("x", 100)}, "pibot/" + strings.Repeat("x", 48)}, // bounded
	} {
		if got := worktree.Name(c.parts...); got != c.want {
			t.Errorf("Name(%q) = %q, want %q", c.parts, got, c.want)
		}
		if got := worktree.Sanitize(c.want); got != c.want {
			t.Errorf("Sanitize(%q) = %q, want it unchanged", c.want, got)
		}
	}
}

func TestNewRefusesWhatIsNoRepository(t *testing.T) {
	dir := repo(t)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{t.TempDir(), sub} {
		if err := worktree.Check(t.Context(), d); err == nil || !strings.Contains(err.Error(), worktree.ErrNotRepo.Error()) {
			t.Errorf("Check(%s) = %v, want %v", d, err, worktree.ErrNotRepo)
		}
	}
}

func TestCreateDiffAndState(t *testing.T) {
	dir := repo(t)
	m := manager(t, dir)
	ctx := t.Context()
	a, err := m.Create(ctx, worktree.Name("slack", "C1", "1.2"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if a.Branch != "pibot/slack-C1-1-2" || a.Path != filepath.Join(m.Root(), "slack-C1-1-2") || a.Base != git(t, dir, "rev-parse", "HEAD") {
		t.Fatalf("tree %+v", a)
	}
	// The same name again is a branch of its own.
	b, err := m.Create(ctx, worktree.Name("slack", "C1", "1.2"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if b.Branch != a.Branch+"-2" || b.Path == a.Path {
		t.Fatalf("second tree %+v", b)
	}
	// The main checkout does not see the worktrees.
	if st := git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("main checkout status %q", st)
	}
	if _, dirty, err := m.State(ctx, a); err != nil || dirty {
		t.Fatalf("fresh worktree dirty=%v err=%v", dirty, err)
	}
	// A commit, a modification and an untracked file all count.
	write(t, filepath.Join(a.Path, "main.txt"), "one\ntwo\n")
	git(t, a.Path, "commit", "-q", "-am", "two")
	write(t, filepath.Join(a.Path, "main.txt"), "one\ntwo\nthree\n")
	write(t, filepath.Join(a.Path, "new.txt"), "new\n")
	head, dirty, err := m.State(ctx, a)
	if err != nil || !dirty || head != git(t, a.Path, "rev-parse", "HEAD") {
		t.Fatalf("state head=%s dirty=%v err=%v", head, dirty, err)
	}
	d, err := m.Diff(ctx, a, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"+two", "+three", "+new", "new.txt"} {
		if !strings.Contains(d.Patch, want) {
			t.Errorf("patch lacks %q:\n%s", want, d.Patch)
		}
	}
	if d.Files != 2 || d.Truncated || !strings.Contains(d.Stat, "2 files changed") {
		t.Errorf("diff %+v", d)
	}
	// The worktree's own index is untouched: new.txt is still untracked.
	if st := git(t, a.Path, "status", "--porcelain"); !strings.Contains(st, "?? new.txt") {
		t.Errorf("status after diff %q", st)
	}
	// The other worktree changed nothing.
	if d, err := m.Diff(ctx, b, 0); err != nil || d.Files != 0 || d.Patch != "" {
		t.Errorf("other diff %+v %v", d, err)
	}
	// Cut at a line.
	short, err := m.Diff(ctx, a, 40)
	if err != nil || !short.Truncated || len(short.Patch) > 40 || strings.HasSuffix(short.Patch, "\n") || short.Lines != d.Lines {
		t.Errorf("short diff %+v %v", short, err)
	}
}

func TestForkFromCommit(t *testing.T) {
	dir := repo(t)
	m := manager(t, dir)
	ctx := t.Context()
	a, err := m.Create(ctx, worktree.Name("web", "c", "1"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(a.Path, "a.txt"), "a\n")
	git(t, a.Path, "add", "a.txt")
	git(t, a.Path, "commit", "-q", "-m", "a")
	at, _, _ := m.State(ctx, a)
	f, err := m.Create(ctx, worktree.Name("web", "c", "2"), at, "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Base != at {
		t.Fatalf("fork base %s, want %s", f.Base, at)
	}
	if b, err := os.ReadFile(filepath.Join(f.Path, "a.txt")); err != nil || string(b) != "a\n" {
		t.Fatalf("fork lacks the parent's file: %q %v", b, err)
	}
	if _, err := m.Create(ctx, "pibot/x", "0123456789abcdef0123456789abcdef01234567", ""); !errors.Is(err, worktree.ErrNoCommit) {
		t.Fatalf("created from a commit that does not exist: %v", err)
	}
}

func TestOpenRecreatesFromBranch(t *testing.T) {
	dir := repo(t)
	m := manager(t, dir)
	ctx := t.Context()
	a, err := m.Create(ctx, worktree.Name("tg", "5"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(a.Path, "kept.txt"), "kept\n")
	git(t, a.Path, "add", "kept.txt")
	git(t, a.Path, "commit", "-q", "-m", "kept")
	if again, err := m.Open(ctx, a); err != nil || again {
		t.Fatalf("open of a present worktree: recreated=%v err=%v", again, err)
	}
	git(t, dir, "worktree", "remove", a.Path)
	again, err := m.Open(ctx, a)
	if err != nil || !again {
		t.Fatalf("open of a removed worktree: recreated=%v err=%v", again, err)
	}
	if b, err := os.ReadFile(filepath.Join(a.Path, "kept.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("recreated worktree lacks the branch's commit: %q %v", b, err)
	}
	// Something that is not one of its worktrees is refused.
	for _, bad := range []worktree.Tree{
		{Path: filepath.Join(m.Root(), "..", "..", "x"), Branch: "pibot/x"},
		{Path: filepath.Join(m.Root(), "y"), Branch: "pibot/x"},
		{Path: filepath.Join(m.Root(), "-x"), Branch: "pibot/-x"},
	} {
		if _, err := m.Open(ctx, bad); err == nil {
			t.Errorf("Open(%+v) succeeded", bad)
		}
	}
}

func TestPruneKeepsChanges(t *testing.T) {
	dir := repo(t)
	m := manager(t, dir)
	ctx := t.Context()
	clean, err := m.Create(ctx, "pibot/clean", "", "")
	if err != nil {
		t.Fatal(err)
	}
	dirty, err := m.Create(ctx, "pibot/dirty", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ignored, err := m.Create(ctx, "pibot/ignored", "", "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dirty.Path, "wip.txt"), "wip\n")
	write(t, filepath.Join(ignored.Path, ".gitignore"), "secret\n")
	git(t, ignored.Path, "add", ".gitignore")
	git(t, ignored.Path, "commit", "-q", "-m", "ignore")
	write(t, filepath.Join(ignored.Path, "secret"), "s\n")
	// Not idle yet: nothing goes.
	if gone, err := m.Prune(ctx, time.Hour, time.Now()); err != nil || len(gone) != 0 {
		t.Fatalf("prune of fresh worktrees: %v %v", gone, err)
	}
	gone, err := m.Prune(ctx, time.Hour, time.Now().Add(2*time.Hour))
	if err != nil || len(gone) != 1 || gone[0] != clean.Path {
		t.Fatalf("prune: %v %v", gone, err)
	}
	if _, err := os.Stat(clean.Path); !os.IsNotExist(err) {
		t.Fatalf("pruned worktree still there: %v", err)
	}
	for _, p := range []string{filepath.Join(dirty.Path, "wip.txt"), filepath.Join(ignored.Path, "secret")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("prune lost %s: %v", p, err)
		}
	}
	if got := git(t, dir, "branch", "--list", "pibot/clean"); got == "" {
		t.Fatal("the pruned worktree's branch is gone")
	}
	if again, err := m.Open(ctx, clean); err != nil || !again {
		t.Fatalf("reopen after prune: %v %v", again, err)
	}
}

// The repository's hooks never run for pibot's git (a chat user's agent
// may have planted them), and a worktree's .git file, which the agent can
// rewrite, never decides which repository git works on.
func TestNoHooksAndNoRedirect(t *testing.T) {
	dir := repo(t)
	planted := filepath.Join(t.TempDir(), "hook-ran")
	hook := filepath.Join(dir, ".git", "hooks", "post-checkout")
	write(t, hook, "#!/bin/sh\ntouch "+planted+"\n")
	if err := os.Chmod(hook, 0o755); err != nil {
		t.Fatal(err)
	}
	m := manager(t, dir)
	ctx := context.Background()
	a, err := m.Create(ctx, "pibot/a", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(planted); err == nil {
		t.Fatal("the repository's post-checkout hook ran")
	}
	// A fake repository in the worktree, named by its .git file.
	evil := filepath.Join(t.TempDir(), "evil")
	git(t, filepath.Dir(evil), "init", "-q", "evil")
	write(t, filepath.Join(a.Path, ".git"), "gitdir: "+filepath.Join(evil, ".git")+"\n")
	write(t, filepath.Join(a.Path, "x.txt"), "x\n")
	d, err := m.Diff(ctx, a, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Patch, "+x") {
		t.Fatalf("diff did not read the real repository:\n%s", d.Patch)
	}
}

// Worktrees made at the same time for the same name get branches of
// their own, none fails.
func TestCreateConcurrent(t *testing.T) {
	dir := repo(t)
	m := manager(t, dir)
	const n = 4
	got := make(chan string, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			tr, err := m.Create(t.Context(), "pibot/same", "", "")
			errs <- err
			got <- tr.Branch
		}()
	}
	seen := map[string]bool{}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		seen[<-got] = true
	}
	if len(seen) != n {
		t.Fatalf("branches %v", seen)
	}
}

// A diff of many files lists a few in its summary and counts them all.
func TestDiffOfManyFiles(t *testing.T) {
	dir := repo(t)
	m := manager(t, dir)
	a, err := m.Create(t.Context(), "pibot/many", "", "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		write(t, filepath.Join(a.Path, fmt.Sprintf("f%02d.txt", i)), "x\n")
	}
	d, err := m.Diff(t.Context(), a, 500)
	if err != nil {
		t.Fatal(err)
	}
	if d.Files != 60 || strings.Count(d.Stat, "\n") > 22 || !strings.Contains(d.Stat, "60 files changed") || !d.Truncated || len(d.Patch) > 500 {
		t.Fatalf("files %d truncated %v stat:\n%s", d.Files, d.Truncated, d.Stat)
	}
}
