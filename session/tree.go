package session

import (
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"
	"sync"
)

type labelState struct {
	label, ts string
}

// Tree is a session file's content in memory: its header, its entries
// linked into their tree, and what replaying them in file order yields
// (labels, the session name, each chat location's head, platform message
// refs). A caller that only reads a session holds its Tree (see
// Session.Tree). It is safe for concurrent use: the Session that owns it
// adds the entries it appends under mu, while readers hold mu shared.
type Tree struct {
	path   string // the file's, for errors
	header Header // set before the Tree is shared, never changed

	// src, for a lazily loaded tree, is where the lines it does not hold
	// are read; nil: it holds every line. Set before the Tree is shared.
	src *bodySource

	mu    sync.RWMutex // guards the fields below
	nodes []*node
	// end is where the lines indexed from the file end, and loaded how
	// many entries were (the rest were appended since): a lazily loaded
	// tree can be kept when its session closes (see Indexes).
	end      int64
	loaded   int
	maxFence int64 // the highest fence of the lines indexed from the file
	// savedEnd is how much of the file the index saved of it covers, as
	// far as the tree knows (0: none; see NewSavedIndexes).
	savedEnd int64
	byID     map[string]*node
	st       replayState
}

// replayState is what replaying a tree's entries in file order yields;
// the Tree's mu guards it.
type replayState struct {
	labels map[string]labelState
	name   string
	heads  map[string]*node
	msgs   map[string]string
}

// newTree builds the in-memory tree of the file at path from its header
// and loaded nodes (none for a new file): parents are resolved (orphans
// after a damaged line are re-attached, loops are cut, both recorded in
// r), then labels, name, heads and message refs are replayed in file
// order. The caller owns nodes and r until it shares the Tree.
func newTree(path string, h Header, nodes []*node, r *Report) *Tree {
	t := &Tree{path: path, header: h, nodes: nodes, byID: make(map[string]*node, len(nodes)),
		st: replayState{labels: map[string]labelState{}, heads: map[string]*node{}, msgs: map[string]string{}}}
	for _, n := range nodes {
		t.byID[n.id] = n
	}
	for i, n := range nodes {
		if n.parentID == "" || n.parentID == n.id {
			continue
		}
		if p := t.byID[n.parentID]; p != nil {
			n.parent = p
		} else if n.damagedBefore && i > 0 {
			// The parent was lost in a damaged line: attach to the nearest
			// earlier valid entry in file order (the writer's causal order).
			n.parent = nodes[i-1]
			if r.Reattached == nil {
				r.Reattached = map[string]string{}
			}
			r.Reattached[n.id] = n.parent.id
		}
		if n.parent != nil {
			n.parent.children = append(n.parent.children, n)
		}
	}
	breakCycles(nodes, r)
	for _, n := range nodes {
		t.st.apply(n)
	}
	return t
}

// apply replays one node (in file order) into labels, name, heads and
// message refs. Callers hold the Tree's mu.
func (st *replayState) apply(n *node) {
	if n.typ != TypeMessage && n.ent == nil {
		if e, err := decodeEntry(n.raw); err == nil {
			n.ent = &e
		} else {
			n.ent = &Entry{Type: n.typ, ID: n.id, ParentID: n.parentID, Timestamp: n.ts}
		}
	}
	switch n.typ {
	case TypeLabel:
		if n.ent.Label != nil && *n.ent.Label != "" {
			st.labels[n.ent.TargetID] = labelState{label: *n.ent.Label, ts: n.ts}
		} else {
			delete(st.labels, n.ent.TargetID)
		}
	case TypeSessionInfo:
		st.name = ""
		if n.ent.Name != nil {
			st.name = strings.TrimSpace(*n.ent.Name)
		}
	}
	switch {
	case n.meta != nil && n.meta.Loc != "":
		n.loc = n.meta.Loc
	case n.parent != nil:
		n.loc = n.parent.loc
	}
	if n.loc != "" {
		st.heads[n.loc] = n
	}
	if n.meta != nil && n.meta.Msg != "" {
		st.msgs[n.meta.Msg] = n.id
	}
}

// add indexes a line the owning Session has just appended (line 0: the
// one after the last), encoded from enc, and returns its node.
func (t *Tree) add(raw []byte, line int, enc, known *Entry) *node {
	n := &node{}
	if err := scanKnownInto(n, raw, enc); err != nil {
		return nil // cannot happen: we encoded it
	}
	if known != nil {
		n.ent = known // apply need not decode raw again
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if line == 0 && len(t.nodes) > 0 {
		line = t.nodes[len(t.nodes)-1].line + 1
	}
	n.line = line
	n.index = len(t.nodes)
	t.nodes = append(t.nodes, n)
	t.byID[n.id] = n
	if p := t.byID[n.parentID]; p != nil && n.parentID != n.id {
		n.parent = p
		p.children = append(p.children, n)
	}
	t.st.apply(n)
	return n
}

// checkNew gives e a fresh id when it has none and checks that a new
// entry may carry its id and parent. The owning Session calls it while no
// other append can run.
func (t *Tree) checkNew(e *Entry) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if e.ID == "" {
		e.ID = newEntryID(func(id string) bool { _, ok := t.byID[id]; return ok })
	} else if _, dup := t.byID[e.ID]; dup {
		return fmt.Errorf("session: %s: entry id %s already exists", t.path, e.ID)
	}
	if e.ParentID != "" {
		if _, ok := t.byID[e.ParentID]; !ok {
			return fmt.Errorf("session: %s: parent %s of new entry not found", t.path, e.ParentID)
		}
	}
	return nil
}

// Header returns the file header.
func (t *Tree) Header() Header { return t.header }

// entry converts a node to a public Entry with the message decoded, its
// line read by br when the tree does not hold it. When that read fails
// (br.err says why), the entry has no Message and no Raw.
func (n *node) entry(br *bodyReader) Entry {
	var e Entry
	var raw []byte
	if n.ent != nil {
		e = *n.ent
		raw = n.raw
		if raw == nil {
			raw = br.line(n)
		}
	} else if raw = br.line(n); raw != nil {
		if d, err := decodeEntry(raw); err == nil {
			e = d
		}
	}
	e.Type, e.ID, e.ParentID, e.Timestamp = n.typ, n.id, n.parentID, n.ts
	if n.parent != nil {
		e.ParentID = n.parent.id // re-attached orphans report their new parent
	}
	e.Pibot, e.Fence, e.Raw = n.meta, n.fence, raw
	return e
}

// entries converts nodes to public Entries, reading the lines t does not
// hold with one reader; it returns that reader's failure.
func (t *Tree) entries(nodes []*node) ([]Entry, error) {
	br := t.bodies()
	defer br.close()
	out := make([]Entry, len(nodes))
	for i, n := range nodes {
		out[i] = n.entry(&br)
	}
	return out, br.err
}

// Get returns the entry with id.
func (t *Tree) Get(id string) (Entry, bool) {
	t.mu.RLock()
	n := t.byID[id]
	t.mu.RUnlock()
	if n == nil {
		return Entry{}, false
	}
	out, err := t.entries([]*node{n})
	if err != nil {
		return Entry{}, false
	}
	return out[0], true
}

// Len returns the number of entries.
func (t *Tree) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.nodes)
}

// Entries returns every entry in file order. Of a lazily loaded tree
// whose file changed under it (ErrFileChanged), the messages it could not
// read again come without Message and Raw.
func (t *Tree) Entries() []Entry {
	t.mu.RLock()
	nodes := slices.Clone(t.nodes)
	t.mu.RUnlock()
	out, _ := t.entries(nodes)
	return out
}

// First returns the first n entries in file order (all, if there are
// fewer): what a session records at its start, read without decoding the
// rest.
func (t *Tree) First(n int) []Entry {
	t.mu.RLock()
	nodes := t.nodes[:min(n, len(t.nodes))]
	t.mu.RUnlock()
	out, _ := t.entries(nodes)
	return out
}

func (n *node) millis() int64 {
	ms, _ := parseMillis(n.ts)
	return ms
}

// sortedChildren returns n's children sorted by timestamp, ties in file order.
func sortedChildren(kids []*node) []*node {
	out := slices.Clone(kids)
	ms := make(map[*node]int64, len(out))
	for _, k := range out {
		ms[k] = k.millis()
	}
	sort.SliceStable(out, func(i, j int) bool { return ms[out[i]] < ms[out[j]] })
	return out
}

// Children returns the children of id sorted by timestamp (stable).
func (t *Tree) Children(id string) []Entry {
	t.mu.RLock()
	n := t.byID[id]
	var kids []*node
	if n != nil {
		kids = sortedChildren(n.children)
	}
	t.mu.RUnlock()
	out, _ := t.entries(kids)
	return out
}

// branchLocked returns the nodes from the root to the entry id ("" =
// pi's default leaf; none when the tree is empty). Cycles end the walk.
// Callers hold mu.
func (t *Tree) branchLocked(id string) ([]*node, error) {
	leaf, err := t.leafLocked(id)
	if err != nil {
		return nil, err
	}
	return t.pathLocked(leaf), nil
}

// leafLocked is the node of entry id ("" = the default leaf; nil when
// the tree has no entries). The caller holds mu.
func (t *Tree) leafLocked(id string) (*node, error) {
	switch {
	case id != "":
		leaf := t.byID[id]
		if leaf == nil {
			return nil, fmt.Errorf("session: %s: entry %s not found", t.path, id)
		}
		return leaf, nil
	case len(t.nodes) > 0:
		return t.nodes[len(t.nodes)-1], nil
	}
	return nil, nil
}

// pathLocked is the branch from the root to leaf. The caller holds mu.
func (t *Tree) pathLocked(leaf *node) []*node {
	var path []*node
	for n := leaf; n != nil && len(path) <= len(t.nodes); n = n.parent {
		path = append(path, n)
	}
	slices.Reverse(path)
	return path
}

// Branch returns the entries from the root to leafID ("" = default leaf).
func (t *Tree) Branch(leafID string) ([]Entry, error) {
	t.mu.RLock()
	path, err := t.branchLocked(leafID)
	t.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	return t.entries(path)
}

// Leaf returns pi's default leaf: the last entry in file order ("" if none).
func (t *Tree) Leaf() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.nodes) == 0 {
		return ""
	}
	return strings.Clone(t.nodes[len(t.nodes)-1].id) // see Heads
}

// Heads returns each chat location's head: the last entry in file order
// belonging to it (an entry belongs to its pibot.loc, else to its parent's).
func (t *Tree) Heads() map[string]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]string, len(t.st.heads))
	for loc, n := range t.st.heads {
		// A tree built from a flat index holds its ids in the index's
		// arena: an id a caller keeps must not keep the arena.
		out[loc] = strings.Clone(n.id)
	}
	return out
}

// Head returns the head of one location.
func (t *Tree) Head(loc string) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n, ok := t.st.heads[loc]
	if !ok {
		return "", false
	}
	return strings.Clone(n.id), true // see Heads
}

// EntryForMsg returns the entry written for a platform message ref.
func (t *Tree) EntryForMsg(msg string) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	id, ok := t.st.msgs[msg]
	return strings.Clone(id), ok // see Heads
}

// Name returns the session name (last session_info, trimmed; "" if none).
func (t *Tree) Name() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.st.name
}

// Label is an entry's current label.
type Label struct {
	Label     string `json:"label"`
	Timestamp string `json:"labelTimestamp"`
}

// Labels returns the current labels by target entry id.
func (t *Tree) Labels() map[string]Label {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]Label, len(t.st.labels))
	for id, l := range t.st.labels {
		out[id] = Label{Label: l.label, Timestamp: l.ts}
	}
	return out
}

// Node is one node of Tree.Roots.
type Node struct {
	Entry          Entry
	Children       []*Node
	Label          string
	LabelTimestamp string
}

// Roots returns the roots in file order (entries with no parent, their own
// id as parent, or an unknown parent), children sorted by timestamp.
func (t *Tree) Roots() []*Node {
	type item struct {
		n   *node
		out *Node
	}
	// Build the skeleton under the lock; decode entries after it.
	var all []item
	var roots []*Node
	t.mu.RLock()
	mk := func(n *node) *Node {
		l := t.st.labels[n.id]
		out := &Node{Label: l.label, LabelTimestamp: l.ts}
		all = append(all, item{n, out})
		return out
	}
	var stack []item
	for _, n := range t.nodes {
		if n.parent == nil {
			r := mk(n)
			roots = append(roots, r)
			stack = append(stack, item{n, r})
		}
	}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, k := range sortedChildren(it.n.children) {
			c := mk(k)
			it.out.Children = append(it.out.Children, c)
			stack = append(stack, item{k, c})
		}
	}
	t.mu.RUnlock()
	br := t.bodies()
	defer br.close()
	for _, it := range all {
		it.out.Entry = it.n.entry(&br) // raw, ent and parent never change once indexed
	}
	return roots
}

// BranchBack yields the entries of the branch to leafID ("" = the default
// leaf) from the leaf toward the root, until yield returns false; nothing
// when leafID is unknown. An entry other than a message comes whole (its
// body was decoded when the file was read); a message entry comes as its
// envelope only: type, ids, timestamp, pibot fields and Raw, with Message
// nil (Get decodes it). A walk to the entries a caller looks for decodes
// none of the messages it passes; in a lazily loaded tree (Options.Lazy)
// it reads none of them either, and their Raw is nil.
func (t *Tree) BranchBack(leafID string) iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		t.mu.RLock()
		leaf, err := t.leafLocked(leafID)
		limit := len(t.nodes)
		t.mu.RUnlock()
		if err != nil {
			return
		}
		// A node's parent never changes once it is indexed: the walk
		// needs no lock. limit ends a cycle.
		br := t.bodies()
		defer br.close()
		for n, i := leaf, 0; n != nil && i <= limit; n, i = n.parent, i+1 {
			if !yield(n.envelope(&br)) {
				return
			}
		}
	}
}

// envelope is n as BranchBack yields it: whole unless a message, whose
// body it leaves undecoded (and, in a lazily loaded tree, unread: Raw is
// nil).
func (n *node) envelope(br *bodyReader) Entry {
	if n.typ != TypeMessage {
		return n.entry(br)
	}
	e := Entry{Type: n.typ, ID: n.id, ParentID: n.parentID, Timestamp: n.ts, Pibot: n.meta, Fence: n.fence, Raw: n.raw}
	if n.parent != nil {
		e.ParentID = n.parent.id
	}
	return e
}
