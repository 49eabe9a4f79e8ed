package session

import (
	"iter"
	"slices"
)

// Envelopes yields every entry in file order as BranchBack yields them:
// whole unless a message, a message as its envelope only (Message nil;
// in a lazily loaded tree its line is not read). What a reader looking
// for entries by their pibot fields or ids over a whole file walks
// without decoding the file's messages. An entry appended during the
// walk may or may not be yielded.
func (t *Tree) Envelopes() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		t.mu.RLock()
		// Appends never change the entries already indexed: the walk
		// needs no lock past this capped slice.
		nodes := t.nodes[:len(t.nodes):len(t.nodes)]
		t.mu.RUnlock()
		br := t.bodies()
		defer br.close()
		for _, n := range nodes {
			if !yield(n.envelope(&br)) {
				return
			}
		}
	}
}

// BranchTail returns the last n entries of the branch to leafID ("" =
// the default leaf), root first, decoded as Branch decodes them: the whole
// branch when it has n entries or fewer, none when n <= 0. A reader that
// shows the end of a long branch (found with BranchBack) reads only that
// end.
func (t *Tree) BranchTail(leafID string, n int) ([]Entry, error) {
	if n <= 0 {
		return nil, nil
	}
	t.mu.RLock()
	leaf, err := t.leafLocked(leafID)
	limit := len(t.nodes)
	var tail []*node
	for p := leaf; p != nil && len(tail) < n && len(tail) <= limit; p = p.parent {
		tail = append(tail, p)
	}
	t.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	slices.Reverse(tail)
	return t.entries(tail)
}
