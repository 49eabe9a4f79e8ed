package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// short is a commit's abbreviation.
func short(commit string) string {
	if len(commit) > 10 {
		return "`" + commit[:10] + "`"
	}
	return "`" + commit + "`"
}

// shownPath is a worktree's path as the chat is shown it: relative to the
// agent's workspace (no server paths in chat).
func shownPath(a *Agent, p string) string {
	if rel, err := filepath.Rel(a.Workspace, p); err == nil {
		return rel
	}
	return filepath.Base(p)
}

// maxDiffPatch bounds the patch /diff shows, in bytes.
const maxDiffPatch = 3000

// cmdWorktree is /worktree: the path and branch of this branch's worktree.
func cmdWorktree(ctx context.Context, c *invocation) {
	a := c.o.agentConfig()
	if a.Worktrees == nil {
		c.tell(ctx, "This conversation's agent (`%s`) works in its workspace, not in worktrees (`agents.NAME.worktree: per_thread`).", c.o.agentRec().Name)
		return
	}
	rec, found, own := c.o.view(c.loc).worktree()
	if !own {
		c.tell(ctx, "%s", noWorktreeYet(rec, found))
		return
	}
	c.tell(ctx, "**Worktree** `%s`\n- branch: `%s`\n- started from %s%s", shownPath(a, rec.Path), rec.Branch, short(rec.Base), forkedFrom(rec))
}

// cmdDiff is /diff: what this branch changed in its worktree against
// where it started, commits and changes not committed alike.
func cmdDiff(ctx context.Context, c *invocation) {
	a := c.o.agentConfig()
	if a.Worktrees == nil {
		c.tell(ctx, "This conversation's agent (`%s`) works in its workspace, not in worktrees, so there is no diff of this thread.", c.o.agentRec().Name)
		return
	}
	rec, found, own := c.o.view(c.loc).worktree()
	if !own {
		c.tell(ctx, "%s", noWorktreeYet(rec, found))
		return
	}
	if _, err := a.Worktrees.Open(ctx, rec.Tree); err != nil {
		c.failed(ctx, "opening the worktree", err)
		return
	}
	d, err := a.Worktrees.Diff(ctx, rec.Tree, maxDiffPatch)
	if err != nil {
		c.failed(ctx, "reading the worktree's changes", err)
		return
	}
	if d.Files == 0 {
		c.tell(ctx, "No changes on `%s` since %s.", rec.Branch, short(rec.Base))
		return
	}
	more := ""
	if d.Truncated {
		more = fmt.Sprintf("\n(cut: %d of %d lines shown)", lineCount(d.Patch), d.Lines)
	}
	sf, pf := fence(d.Stat), fence(d.Patch)
	c.tell(ctx, "**Diff** of `%s` against %s: %s changed\n%s\n%s\n%s\n%sdiff\n%s\n%s%s", rec.Branch, short(rec.Base), plural(d.Files, "file"),
		sf, d.Stat, sf, pf, d.Patch, pf, more)
}

// noWorktreeYet says why a branch has no worktree of its own.
func noWorktreeYet(rec worktreeRecord, found bool) string {
	if found {
		return fmt.Sprintf("This branch has no worktree of its own yet: its next run makes one, started from `%s` at %s.", rec.Branch, short(rec.Head))
	}
	return "This branch has no worktree yet: its next run makes one."
}

func forkedFrom(rec worktreeRecord) string {
	if rec.From == "" {
		return ""
	}
	return fmt.Sprintf(" (forked from `%s`)", rec.From)
}

func lineCount(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}

// worktreeStatus is /status's line about the branch's worktree.
func worktreeStatus(o *owner, loc *location) string {
	if o.agentConfig().Worktrees == nil {
		return ""
	}
	rec, _, own := o.view(loc).worktree()
	if !own {
		return "\n- worktree: none yet (the next run makes one)"
	}
	return fmt.Sprintf("\n- worktree: `%s` on branch `%s`", shownPath(o.agentConfig(), rec.Path), rec.Branch)
}
