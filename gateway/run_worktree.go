package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/worktree"
	"github.com/pibot/pibot/session"
)

// writingTools are the tools that change files in the workspace: an
// agent without any of them gets no worktree.
var writingTools = []string{"write", "edit", "bash"}

// writes reports whether tools has a tool that writes files.
func writes(tools []agent.Tool) bool {
	for _, t := range tools {
		if slices.Contains(writingTools, t.Spec().Name) {
			return true
		}
	}
	return false
}

// worktreeOf returns the worktree of loc's branch (the last worktree entry
// on it), and whether the branch owns it: the entry is the location's own,
// and no other line of the location worked on from a point between it and
// the head (inclusive). Another line worked on when a child there, off
// the branch, has a message below it: that line's runs changed the
// worktree since, so this branch is a fork (/fork, a reply to an earlier
// message, a jump back) and starts a worktree of its own from the state
// recorded at that point. What follows the head without a message (the
// delivery of the reply, a lease taken) is no other line: a reply to the
// latest answer goes on in the same worktree. A child that made a
// worktree of another branch is a fork's and never worked in this one.
func (o *owner) worktreeOf(loc *location) (rec worktreeRecord, found, own bool) {
	tree := o.tree()
	// From the head back to the entry, without decoding a message.
	var path []string
	for e := range tree.BranchBack(o.head(loc)) {
		path = append(path, e.ID)
		if r, ok := readWorktree(e); ok {
			rec, found = r, true
			break
		}
	}
	if !found || rec.loc != loc.key {
		return rec, found, false
	}
	slices.Reverse(path)
	for i, id := range path {
		next := ""
		if i+1 < len(path) {
			next = path[i+1]
		}
		for _, c := range tree.Children(id) {
			if c.ID != next && workedIn(tree, c, loc.key, rec.Branch) {
				return rec, true, false
			}
		}
	}
	return rec, true, true
}

// workedIn reports whether the line from e on worked in the worktree of
// branch: a message of location key is at e or below it, not below a
// worktree entry of another branch (a fork's own) nor in another
// location.
func workedIn(tree *session.Tree, e session.Entry, key, branch string) bool {
	todo := []session.Entry{e}
	for len(todo) > 0 {
		e, todo = todo[len(todo)-1], todo[:len(todo)-1]
		if e.Pibot != nil && e.Pibot.Loc != "" && e.Pibot.Loc != key {
			continue
		}
		if r, ok := readWorktree(e); ok && r.Branch != branch {
			continue
		}
		if e.Type == session.TypeMessage || e.Type == session.TypeCustomMessage {
			return true
		}
		todo = append(todo, tree.Children(e.ID)...)
	}
	return false
}

func readWorktree(e session.Entry) (worktreeRecord, bool) {
	if e.Type != session.TypeCustom || e.CustomType != customWorktree {
		return worktreeRecord{}, false
	}
	var r worktreeRecord
	if json.Unmarshal(e.Data, &r) != nil || r.Path == "" || r.Branch == "" {
		return worktreeRecord{}, false
	}
	r.id = e.ID
	if e.Pibot != nil {
		r.loc = e.Pibot.Loc
	}
	return r, true
}

// openWorktree gives the run the worktree of its branch when its agent
// works in worktrees and has tools that write: the branch's own, made
// again from its branch if it was pruned, or a new one, started from the
// parent branch's state at the fork (or from the repository's HEAD for a
// branch without a parent worktree). A worktree made for the location
// before a crash, never claimed, is adopted (Worktrees.Create). It
// returns a notice for the chat when the new worktree is a fork's.
func (r *run) openWorktree(ctx context.Context) (notice string, err error) {
	o, loc := r.o, r.loc
	a := o.agentConfig()
	if a.Worktrees == nil || !writes(a.Tools(ToolRun{})) {
		return "", nil
	}
	rec, found, own := o.worktreeOf(loc)
	if own {
		if _, err := a.Worktrees.Open(ctx, rec.Tree); err != nil {
			return "", err
		}
		r.setWorktree(rec)
		return "", nil
	}
	name := worktree.Name(string(loc.conv.Platform), loc.conv.Channel, loc.conv.Thread)
	var t worktree.Tree
	if found {
		t, err = a.Worktrees.Create(ctx, name, rec.Head, loc.key)
		switch {
		case err == nil && rec.Dirty:
			notice = fmt.Sprintf("🌿 This branch works in a worktree of its own (`%s`), started from `%s` at %s, where the conversation forked; the changes not committed there then are not in it.",
				t.Branch, rec.Branch, short(rec.Head))
		case err == nil:
			notice = fmt.Sprintf("🌿 This branch works in a worktree of its own (`%s`), started from `%s` at %s, where the conversation forked.",
				t.Branch, rec.Branch, short(rec.Head))
		case errors.Is(err, worktree.ErrNoCommit):
			// The commit of that point is gone (a reset, then git's gc):
			// the parent's worktree as it is now.
			o.log.Warn("worktree: fork point not in the repository", "commit", rec.Head, "err", err)
			var head string
			if _, oerr := a.Worktrees.Open(ctx, rec.Tree); oerr != nil {
				return "", errors.Join(err, oerr)
			}
			if head, _, err = a.Worktrees.State(ctx, rec.Tree); err != nil {
				return "", err
			}
			if t, err = a.Worktrees.Create(ctx, name, head, loc.key); err != nil {
				return "", err
			}
			notice = fmt.Sprintf("🌿 This branch works in a worktree of its own (`%s`). Git no longer has `%s` as it was where the conversation forked, so it started from that branch's worktree as it is now (%s).",
				t.Branch, rec.Branch, short(head))
		}
	} else {
		t, err = a.Worktrees.Create(ctx, name, "", loc.key)
	}
	if err != nil {
		return "", err
	}
	made := worktreeRecord{Tree: t, Head: t.Base}
	if found {
		made.From = rec.Branch
	}
	// Claimed before the record, so that no later Create (a fork of this
	// place from the same commit) ever adopts a recorded worktree; a crash
	// between the two leaves the worktree to a "-2", as before adoption.
	if err := a.Worktrees.Claim(t); err != nil {
		return "", err
	}
	if err := r.recordWorktree(made); err != nil {
		return "", err
	}
	return notice, nil
}

// recordWorktree appends rec as the location's worktree entry, durably.
func (r *run) recordWorktree(rec worktreeRecord) error {
	data, _ := json.Marshal(rec)
	e, err := r.o.append(r.loc, session.Entry{Type: session.TypeCustom, CustomType: customWorktree, Data: data}, session.SyncAlways)
	if err != nil {
		return err
	}
	rec.id, rec.loc = e.ID, r.loc.key
	r.setWorktree(rec)
	return nil
}

// closeWorktree records the state of the run's worktree after the run
// when it changed (a commit, changes made or committed), so a fork from
// here starts where this branch was.
func (r *run) closeWorktree(ctx context.Context) {
	rec, ok := r.worktree()
	if !ok || r.frozen.Load() || r.silent.Load() {
		return
	}
	head, dirty, err := r.o.agentConfig().Worktrees.State(ctx, rec.Tree)
	if err != nil {
		r.o.log.Warn("worktree: state", "loc", r.loc.key, "err", err)
		return
	}
	if head == rec.Head && dirty == rec.Dirty {
		return
	}
	rec.Head, rec.Dirty = head, dirty
	if err := r.recordWorktree(rec); err != nil {
		r.o.log.Warn("worktree: record", "loc", r.loc.key, "err", err)
	}
}

func (r *run) setWorktree(rec worktreeRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wt = &rec
}

// worktree is the run's worktree, if it has one.
func (r *run) worktree() (worktreeRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wt == nil {
		return worktreeRecord{}, false
	}
	return *r.wt, true
}

// dir is where the run's tools work: its worktree, or "" for the agent's
// workspace.
func (r *run) dir() string {
	if rec, ok := r.worktree(); ok {
		return rec.Path
	}
	return ""
}

// worktreePrompt tells the model where the run works when it has a
// worktree: the system prompt names the workspace as the working
// directory, and the tools work in the worktree.
func (r *run) worktreePrompt() string {
	rec, ok := r.worktree()
	if !ok {
		return ""
	}
	return fmt.Sprintf("\n\nThis conversation works in a git worktree of its own: %s (branch %s, made from the repository at %s). It is the working directory of every tool, and relative paths resolve in it; work on files there, not in %s itself.",
		rec.Path, rec.Branch, r.o.agentConfig().Workspace, r.o.agentConfig().Workspace)
}

// sendNotice posts text to the run's conversation (a fork's worktree).
func (r *run) sendNotice(ctx context.Context, text string) {
	ad := r.o.adapters[r.loc.conv.Platform]
	if ad == nil || text == "" || r.silent.Load() {
		return
	}
	if _, err := ad.Send(ctx, r.loc.conv, chat.Out{Markdown: text}); err != nil {
		r.o.log.Warn("send", "err", err)
	}
}
