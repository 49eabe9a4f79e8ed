package gateway

import (
	"context"
	"time"

	"github.com/pibot/pibot/internal/worktree"
)

// Worktrees makes and keeps the git worktrees of one agent's
// conversations (agents.NAME.worktree: per_thread); *worktree.Manager is
// one.
type Worktrees interface {
	// Create makes a worktree for key (a location), or adopts the one
	// made for key before a crash and never claimed (worktree.Manager's
	// Create); Claim, called just before the worktree's record, says no
	// later Create may adopt it.
	Create(ctx context.Context, name, from, key string) (worktree.Tree, error)
	Claim(t worktree.Tree) error
	Open(ctx context.Context, t worktree.Tree) (recreated bool, err error)
	State(ctx context.Context, t worktree.Tree) (head string, dirty bool, err error)
	Diff(ctx context.Context, t worktree.Tree, maxPatch int) (worktree.Diff, error)
	Prune(ctx context.Context, idle time.Duration, now time.Time) ([]string, error)
}

// customWorktree is the custom entry that records a branch's worktree:
// where it was made (path, branch, base commit), and after a run that
// changed its state, the commit it was at.
const customWorktree = "pibot.worktree"

// worktreeRecord is a customWorktree entry's data.
type worktreeRecord struct {
	worktree.Tree
	// Head is the commit the worktree was at when the entry was written
	// (its base when made); Dirty: it had changes not committed then.
	Head  string `json:"head"`
	Dirty bool   `json:"dirty,omitempty"`
	// From is the branch a fork's worktree started from.
	From string `json:"from,omitempty"`
	// id is the entry's id; loc its location.
	id, loc string
}

// worktreePruneEvery is how often idle worktrees are looked for.
const worktreePruneEvery = time.Hour

// pruneWorktrees removes, every interval, the worktrees of every agent
// that were idle and clean for longer than its WorktreePruneAfter, until
// ctx ends.
func (g *Gateway) pruneWorktrees(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, name := range g.agents.names() {
			a := g.agents[name]
			if a.Worktrees == nil || a.WorktreePruneAfter <= 0 {
				continue
			}
			gone, err := a.Worktrees.Prune(ctx, a.WorktreePruneAfter, time.Now())
			if err != nil && ctx.Err() == nil {
				g.log.Warn("worktree: prune", "agent", name, "err", err)
			}
			if len(gone) > 0 {
				g.log.Info("idle worktrees removed (their branches stay)", "agent", name, "count", len(gone))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
