package worktree

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// gitCmd runs the git binary at bin the way pibot runs git: with
// explicit arguments, no shell, no hooks, fsmonitor, pager or prompt,
// and none of pibot's GIT_* variables.
type gitCmd struct {
	bin string
}

// in runs git on the worktree at work whose administrative directory is
// gitDir.
func (g gitCmd) in(ctx context.Context, gitDir, work string, env []string, args ...string) (string, error) {
	return g.run(ctx, env, append([]string{"--git-dir=" + gitDir, "--work-tree=" + work, "-C", work}, args...)...)
}

// run runs git with args (no shell), without hooks, fsmonitor, pagers or
// prompts and without pibot's GIT_* environment, and returns its output
// trimmed.
func (g gitCmd) run(ctx context.Context, env []string, args ...string) (string, error) {
	full := append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat",
		"-c", "diff.external=", "--no-pager"}, args...)
	cmd := exec.CommandContext(ctx, g.bin, full...)
	cmd.Env = append(gitEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		what := args[0]
		for _, a := range args {
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "/") {
				what = a
				break
			}
		}
		return "", fmt.Errorf("git %s: %w: %s", what, err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// dropGitlinks removes the submodules from the index env names. git add
// --all would otherwise ask each submodule already in the index whether
// it changed inside, running git in it with the submodule's own
// configuration (the agent's: a filter driver, say), whatever pibot's
// options say; a submodule not in the index is added at the commit it is
// at without that question.
func (g gitCmd) dropGitlinks(ctx context.Context, gd, work string, env []string) error {
	out, err := g.in(ctx, gd, work, env, "ls-files", "--stage", "-z")
	if err != nil {
		return err
	}
	var links []string
	for e := range strings.SplitSeq(out, "\x00") {
		if mode, rest, ok := strings.Cut(e, " "); ok && mode == "160000" {
			if _, path, ok := strings.Cut(rest, "\t"); ok {
				links = append(links, path)
			}
		}
	}
	if len(links) == 0 {
		return nil
	}
	_, err = g.in(ctx, gd, work, env, append([]string{"update-index", "--force-remove", "--"}, links...)...)
	return err
}

// statusArgs is git status listing every change of a worktree: modified,
// staged, untracked and ignored files, and a submodule checked out at
// another commit. What changed inside a submodule is not looked at: git
// would run git in it, with the submodule's own configuration (a filter
// driver, say) that the agent may have written.
func statusArgs() []string {
	return []string{"status", "--porcelain", "--untracked-files=all", "--ignored=matching", "--ignore-submodules=dirty"}
}

// gitEnv is pibot's environment without GIT_* variables, with git's
// prompts off and its messages in English.
func gitEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "LC_ALL=") {
			out = append(out, kv)
		}
	}
	return append(out, "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
}
