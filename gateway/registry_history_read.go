package gateway

import (
	"context"
	"errors"

	"github.com/pibot/pibot/session"
)

// reading is one read of the history (a transcript, a list): it opens
// each session file it reads once, and lets them all go when it closes.
type reading struct {
	h     *history
	trees map[string]openTree
	// reopened are the files opened again after they changed under the
	// index of this read's first open (see reopen).
	reopened map[string]bool
}

// openTree is a session file as a reading has it: its tree, a function
// that lets it go, or why it could not be opened.
type openTree struct {
	tree *session.Tree
	done func()
	err  error
}

// reading starts a read of the history.
func (h *history) reading() *reading {
	return &reading{h: h, trees: map[string]openTree{}, reopened: map[string]bool{}}
}

// close lets go of every session file r opened.
func (r *reading) close() {
	for _, t := range r.trees {
		if t.done != nil {
			t.done()
		}
	}
	clear(r.trees)
}

// at returns the tree of the session at path. A loaded session is read
// through its owner (which has what is not flushed yet); any other is
// opened read-only and lazily: its messages are read when shown, and its
// index is kept when it closes for the next open, like an evicted
// session's (the registry's session.Indexes).
func (r *reading) at(path string) (*session.Tree, error) {
	if t, ok := r.trees[path]; ok {
		return t.tree, t.err
	}
	var t openTree
	r.h.reg.mu.Lock()
	o := r.h.reg.owners[path]
	r.h.reg.mu.Unlock()
	if o != nil {
		t.tree = o.tree()
	} else if s, err := session.Open(r.h.reg.files, path, session.Options{ReadOnly: true, Lazy: true, Indexes: r.h.reg.indexes}); err != nil {
		t.err = err
	} else {
		t.tree, t.done = s.Tree(), func() { _ = s.Close() }
	}
	r.trees[path] = t
	return t.tree, t.err
}

// reopen lets go of the session at path that r opened read-only, once:
// the file changed under its index (session.ErrFileChanged: a repair
// rewrote it), and the next at opens it as it is now, as a read of the
// whole file would have read it. It reports whether it did.
func (r *reading) reopen(path string) bool {
	t, ok := r.trees[path]
	if !ok || t.done == nil || r.reopened[path] {
		return false
	}
	t.done()
	delete(r.trees, path)
	r.reopened[path] = true
	return true
}

// branch is what a session file says about one location.
type branch struct {
	context []session.Entry // the entries of the branch the model's context is built from (contextEntries)
	agent   string          // the branch's agent: its first agent record, root first
	name    string          // the session's name
	path    string          // the session file
}

// branchOf returns what the session bound to loc says about loc's branch.
func (r *reading) branchOf(ctx context.Context, loc string) (branch, error) {
	path, ok, err := r.h.index.Get(ctx, loc)
	if err != nil || !ok {
		return branch{}, err
	}
	tree, err := r.at(path)
	if err != nil {
		// A file not written yet (a new conversation's first run) or gone.
		r.h.reg.log.Debug("history: session unreadable", "loc", loc, "path", path, "err", err)
		return branch{}, nil
	}
	head, ok := tree.Head(loc)
	if !ok {
		return branch{path: path}, nil
	}
	entries, agent, err := contextOf(tree, head)
	if errors.Is(err, session.ErrFileChanged) && r.reopen(path) {
		return r.branchOf(ctx, loc)
	}
	return branch{context: entries, agent: agent, name: tree.Name(), path: path}, err
}

// contextOf returns contextEntries of the branch to head and the branch's
// agent, decoding only the entries it returns: the branch is walked as
// envelopes from the head (session.Tree.BranchBack), and the part of it
// contextEntries keeps is read as its tail (session.Tree.BranchTail).
func contextOf(tree *session.Tree, head string) ([]session.Entry, string, error) {
	// Positions count from the head (0) toward the root.
	n := 0           // entries walked
	last := -1       // the last compaction: the one contextEntries stands on
	first := -1      // the first compaction with its id: where pi finds it
	var keptAt []int // the entries with its first kept entry's id
	var comp session.Entry
	agent := ""
	for e := range tree.BranchBack(head) {
		if e.Type == session.TypeCompaction {
			if last < 0 {
				comp, last = e, n
			}
			if e.ID == comp.ID {
				first = n
			}
		}
		if last >= 0 && e.ID == comp.FirstKeptEntryID {
			keptAt = append(keptAt, n)
		}
		if name, ok := agentRecordOf(e); ok {
			agent = name // the record nearest the root wins
		}
		n++
	}
	tail := n // no compaction: the whole branch
	if last >= 0 {
		// From the first kept entry before the compaction pi finds (the
		// one nearest the root), else from that compaction.
		tail = first + 1
		for _, k := range keptAt {
			if k > first {
				tail = max(tail, k+1)
			}
		}
	}
	entries, err := tree.BranchTail(head, tail)
	if err != nil {
		return nil, "", err
	}
	return contextEntries(entries), agent, nil
}
