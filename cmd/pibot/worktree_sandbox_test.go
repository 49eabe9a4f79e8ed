package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/worktree"
	"github.com/pibot/pibot/llm"
)

// gitT runs git in dir for the test's setup and checks, as the
// repository's user would (hooks and all).
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// sandboxedWorktree makes a repository, a per_thread agent's toolbox over
// it with the real bubblewrap sandbox, and one worktree; it skips when
// git or a working bwrap is missing.
func sandboxedWorktree(t *testing.T) (tb *toolbox, m *worktree.Manager, tree worktree.Tree, repo string) {
	t.Helper()
	for _, bin := range []string{"git", "bwrap"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed (the sandbox tests want bubblewrap: apt-get install bubblewrap): git in a worktree's sandbox is not tested", bin)
		}
	}
	dir := t.TempDir()
	cfg := config.Default()
	cfg.DataDir, cfg.Agent.Workspace, cfg.Agent.Sandbox = filepath.Join(dir, "data"), filepath.Join(dir, "ws"), "bwrap"
	cfg.Agent.Worktree = config.WorktreePerThread
	repo = cfg.Agent.Workspace
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, repo, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "main.txt"), []byte("main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, repo, "add", "main.txt")
	gitT(t, repo, "commit", "-q", "-m", "base")
	// config.worktree counts: a worktree's own configuration is read.
	gitT(t, repo, "config", "extensions.worktreeConfig", "true")
	log := slog.New(slog.DiscardHandler)
	tb, err := newToolbox(t.Context(), cfg, log)
	if err != nil {
		t.Skipf("bubblewrap cannot create a sandbox on this host, git in a worktree's sandbox is not tested: %v", err)
	}
	t.Cleanup(tb.close)
	wts, err := worktrees(t.Context(), cfg, config.DefaultAgent, tb.ws, tb, log)
	if err != nil {
		t.Fatal(err)
	}
	m = wts.(*worktree.Manager)
	if tree, err = m.Create(t.Context(), worktree.Name("test", "c", "t"), "", "loc"); err != nil {
		t.Fatal(err)
	}
	return tb, m, tree, repo
}

// bashIn runs command with the bash tool of a run in dir, as an owner's
// run would, and returns its output and whether the tool said it failed.
func bashIn(t *testing.T, tb *toolbox, dir, command string) (string, bool) {
	t.Helper()
	return toolIn(t, tb, dir, true, "bash", map[string]string{"command": command})
}

// toolIn calls the tool name of a run in dir for an owner or not, and
// returns its output and whether it failed.
func toolIn(t *testing.T, tb *toolbox, dir string, owner bool, name string, args map[string]string) (string, bool) {
	t.Helper()
	for _, tool := range tb.forRun(dir, nil, func() bool { return owner }) {
		if tool.Spec().Name != name {
			continue
		}
		raw, _ := json.Marshal(args)
		out, err := tool.Execute(t.Context(), "c", raw, nil)
		if err != nil {
			return err.Error(), true
		}
		var text strings.Builder
		for _, c := range out.Content {
			if c.Type == llm.ContentText {
				text.WriteString(c.Text)
			}
		}
		return text.String(), false
	}
	t.Fatalf("no %s tool", name)
	return "", false
}

// In the sandbox of a thread's worktree the agent's own git works: status,
// add and commit on the thread's branch, and what it committed is in the
// worktree's diff (what /diff shows); the main checkout stays out of
// sight.
func TestGitWorksInAWorktreesSandbox(t *testing.T) {
	tb, m, tree, repo := sandboxedWorktree(t)
	out, failed := bashIn(t, tb, tree.Path, `set -e
echo agent > agent.txt
git status --porcelain
git add agent.txt
git -c user.name=agent -c user.email=agent@example.com commit -q -m "by the agent"
git log --format=%s -1
git rev-parse --abbrev-ref HEAD
test -e `+filepath.Join(repo, "main.txt")+` && echo MAIN-VISIBLE || true`)
	if failed || !strings.Contains(out, "?? agent.txt") || !strings.Contains(out, "by the agent") || !strings.Contains(out, tree.Branch) {
		t.Fatalf("git in the sandbox (failed %v):\n%s", failed, out)
	}
	if strings.Contains(out, "MAIN-VISIBLE") {
		t.Fatalf("the main checkout's files are visible in the sandbox:\n%s", out)
	}
	head, dirty, err := m.State(t.Context(), tree)
	if err != nil || dirty || head == tree.Base || head != gitT(t, repo, "rev-parse", tree.Branch) {
		t.Fatalf("State after the agent's commit: head %s dirty %v err %v (base %s)", head, dirty, err, tree.Base)
	}
	d, err := m.Diff(t.Context(), tree, 0)
	if err != nil || !strings.Contains(d.Patch, "+agent") || d.Files != 1 {
		t.Fatalf("the diff of the agent's commit: %+v %v", d, err)
	}
	if got := gitT(t, repo, "log", "--format=%s", "-1", tree.Branch); got != "by the agent" {
		t.Fatalf("the repository's branch %s: %q", tree.Branch, got)
	}
}

// The attacks an agent in a worktree's sandbox would try, to plant code
// that pibot or the repository's user runs later: the repository's
// configuration (hooks path, fsmonitor, a filter driver, an alias), a
// hook, info/attributes, the worktree's config.worktree, its .git file,
// another branch, the main checkout. Each is refused; afterwards pibot's
// git calls and the user's git in the repository and the worktree run
// nothing planted, and the repository is as it was.
func TestGitInAWorktreesSandboxPlantsNothing(t *testing.T) {
	tb, m, tree, repo := sandboxedWorktree(t)
	common := filepath.Join(repo, ".git")
	gd := strings.TrimSpace(strings.TrimPrefix(readT(t, filepath.Join(tree.Path, ".git")), "gitdir:"))
	mark := filepath.Join(tree.Path, "planted-ran") // a mark the host sees
	prog := filepath.Join(tree.Path, "planted.sh")  // written by the agent, runs on the host if called
	if _, failed := bashIn(t, tb, tree.Path, "printf '#!/bin/sh\\ntouch "+mark+"\\ncat\\n' > planted.sh && chmod +x planted.sh"); failed {
		t.Fatal("the agent cannot write its own worktree")
	}
	before := snapshot(t, repo, common, gd, tree)
	for _, attack := range []string{
		"git config core.hooksPath " + tree.Path,
		"git config core.fsmonitor " + prog,
		"git config filter.x.clean " + prog,
		"git config alias.st '!" + prog + "'",
		"git config --worktree core.fsmonitor " + prog,
		"printf '[core]\\n\\tfsmonitor = " + prog + "\\n' > " + filepath.Join(gd, "config.worktree"),
		"printf '[core]\\n\\thooksPath = " + tree.Path + "\\n' >> " + filepath.Join(common, "config"),
		"mkdir -p " + filepath.Join(common, "hooks") + " 2>/dev/null; cp planted.sh " + filepath.Join(common, "hooks", "post-checkout"),
		"cp planted.sh " + filepath.Join(common, "hooks", "pre-commit"),
		"printf '* filter=x\\n' > " + filepath.Join(common, "info", "attributes"),
		"printf 'gitdir: /tmp/elsewhere\\n' > .git",
		"rm -f .git",
		"printf '../../../../elsewhere\\n' > " + filepath.Join(gd, "commondir"),
		"printf '/tmp/elsewhere/.git\\n' > " + filepath.Join(gd, "gitdir"),
		"git update-ref refs/heads/main HEAD",
		"cat " + filepath.Join(repo, "main.txt"),
		"rm -rf " + filepath.Join(common, "objects", "pack") + "/* && mkdir " + filepath.Join(common, "objects", "pack", "planted"),
		"printf '/tmp\\n' > " + filepath.Join(common, "objects", "info", "alternates"),
	} {
		if out, failed := bashIn(t, tb, tree.Path, attack); !failed {
			t.Errorf("the sandbox let the agent do %q:\n%s", attack, out)
		}
	}
	if after := snapshot(t, repo, common, gd, tree); after != before {
		t.Fatalf("the repository changed under the agent's attacks:\nbefore %s\nafter  %s", before, after)
	}
	// The file tools of an owner (not confined) see what bash sees: the
	// repository's files are read-only to them too.
	for _, p := range []string{filepath.Join(common, "config"), filepath.Join(gd, "config.worktree"), filepath.Join(tree.Path, ".git")} {
		if out, failed := toolIn(t, tb, tree.Path, true, "write", map[string]string{"path": p, "content": "planted"}); !failed {
			t.Errorf("an owner's write of %s: %s", p, out)
		}
	}
	// A confined write (not an owner's) reaches the worktree's .git file;
	// the next sandboxed call puts back what git wrote there.
	if out, failed := toolIn(t, tb, tree.Path, false, "write", map[string]string{"path": ".git", "content": "gitdir: /tmp/elsewhere\n"}); failed {
		t.Fatalf("a confined write of .git failed, the test needs it: %s", out)
	}
	if out, failed := bashIn(t, tb, tree.Path, "git status --porcelain"); failed {
		t.Fatalf("git after the .git file was rewritten: %s", out)
	}
	if got := readT(t, filepath.Join(tree.Path, ".git")); got != "gitdir: "+gd+"\n" {
		t.Fatalf("the .git file is %q, want it put back", got)
	}
	// pibot's git, then the user's, in the worktree and the repository.
	if err := os.WriteFile(filepath.Join(tree.Path, "x.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.State(t.Context(), tree); err != nil {
		t.Fatal(err)
	}
	if d, err := m.Diff(t.Context(), tree, 0); err != nil || !strings.Contains(d.Patch, "+x") {
		t.Fatalf("Diff: %+v %v", d, err)
	}
	gitT(t, tree.Path, "status")
	gitT(t, tree.Path, "add", "x.txt")
	gitT(t, tree.Path, "commit", "-q", "-m", "by the user")
	gitT(t, repo, "status")
	gitT(t, repo, "checkout", "-q", "-b", "other")
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("a program the agent planted ran on the host")
	}
}

// snapshot is what the attacks must leave alone: the repository's
// configuration, hooks, info, the main branch and checkout, the
// worktree's administrative files and .git file, the packs.
func snapshot(t *testing.T, repo, common, gd string, tree worktree.Tree) string {
	t.Helper()
	var b strings.Builder
	for _, p := range []string{filepath.Join(common, "config"), filepath.Join(gd, "config.worktree"), filepath.Join(gd, "commondir"),
		filepath.Join(gd, "gitdir"), filepath.Join(tree.Path, ".git"), filepath.Join(repo, "main.txt")} {
		c, err := os.ReadFile(p)
		b.WriteString(p + "=" + string(c) + "|" + errString(err) + "\n")
	}
	for _, d := range []string{filepath.Join(common, "hooks"), filepath.Join(common, "info"), filepath.Join(common, "objects", "pack"), filepath.Join(common, "objects", "info")} {
		ents, err := os.ReadDir(d)
		b.WriteString(d + ":" + errString(err))
		for _, e := range ents {
			b.WriteString(" " + e.Name())
		}
		b.WriteString("\n")
	}
	b.WriteString("main=" + gitT(t, repo, "rev-parse", "main") + "\n")
	b.WriteString("branches=" + gitT(t, repo, "branch", "--format=%(refname:short)") + "\n")
	return b.String()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func readT(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
