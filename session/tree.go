package session

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

type labelState struct {
	label, ts string
}

// index builds the in-memory tree from loaded nodes: parents are resolved
// (orphans after a damaged line are re-attached, loops are cut), then
// labels, name, heads and message refs are replayed in file order.
func (s *Session) index(nodes []*node) {
	s.nodes = nodes
	s.byID = make(map[string]*node, len(nodes))
	for _, n := range nodes {
		s.byID[n.id] = n
	}
	for i, n := range nodes {
		if n.parentID == "" || n.parentID == n.id {
			continue
		}
		if p := s.byID[n.parentID]; p != nil {
			n.parent = p
		} else if n.damagedBefore && i > 0 {
			// The parent was lost in a damaged line: attach to the nearest
			// earlier valid entry in file order (the writer's causal order).
			n.parent = nodes[i-1]
			if s.report.Reattached == nil {
				s.report.Reattached = map[string]string{}
			}
			s.report.Reattached[n.id] = n.parent.id
		}
		if n.parent != nil {
			n.parent.children = append(n.parent.children, n)
		}
	}
	s.breakCycles(nodes)
	for _, n := range nodes {
		s.indexOne(n)
	}
}

// indexOne applies one node (in file order) to labels, name, heads and
// message refs. Callers hold mu.
func (s *Session) indexOne(n *node) {
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
			s.labels[n.ent.TargetID] = labelState{label: *n.ent.Label, ts: n.ts}
		} else {
			delete(s.labels, n.ent.TargetID)
		}
	case TypeSessionInfo:
		s.name = ""
		if n.ent.Name != nil {
			s.name = strings.TrimSpace(*n.ent.Name)
		}
	}
	switch {
	case n.meta != nil && n.meta.Loc != "":
		n.loc = n.meta.Loc
	case n.parent != nil:
		n.loc = n.parent.loc
	}
	if n.loc != "" {
		s.heads[n.loc] = n
	}
	if n.meta != nil && n.meta.Msg != "" {
		s.msgs[n.meta.Msg] = n.id
	}
}

// entry converts a node to a public Entry with the message decoded.
func (n *node) entry() Entry {
	var e Entry
	if n.ent != nil {
		e = *n.ent
	} else if d, err := decodeEntry(n.raw); err == nil {
		e = d
	}
	e.Type, e.ID, e.ParentID, e.Timestamp = n.typ, n.id, n.parentID, n.ts
	if n.parent != nil {
		e.ParentID = n.parent.id // re-attached orphans report their new parent
	}
	e.Pibot, e.Fence, e.Raw = n.meta, n.fence, n.raw
	return e
}

// Get returns the entry with id.
func (s *Session) Get(id string) (Entry, bool) {
	s.mu.RLock()
	n := s.byID[id]
	s.mu.RUnlock()
	if n == nil {
		return Entry{}, false
	}
	return n.entry(), true
}

// Len returns the number of entries.
func (s *Session) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.nodes)
}

// Entries returns every entry in file order.
func (s *Session) Entries() []Entry {
	s.mu.RLock()
	nodes := slices.Clone(s.nodes)
	s.mu.RUnlock()
	out := make([]Entry, len(nodes))
	for i, n := range nodes {
		out[i] = n.entry()
	}
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
func (s *Session) Children(id string) []Entry {
	s.mu.RLock()
	n := s.byID[id]
	var kids []*node
	if n != nil {
		kids = sortedChildren(n.children)
	}
	s.mu.RUnlock()
	out := make([]Entry, len(kids))
	for i, k := range kids {
		out[i] = k.entry()
	}
	return out
}

// pathLocked returns the nodes from the root to leaf. Cycles end the walk.
func (s *Session) pathLocked(leaf *node) []*node {
	var path []*node
	for n := leaf; n != nil && len(path) <= len(s.nodes); n = n.parent {
		path = append(path, n)
	}
	slices.Reverse(path)
	return path
}

// Branch returns the entries from the root to leafID ("" = default leaf).
func (s *Session) Branch(leafID string) ([]Entry, error) {
	s.mu.RLock()
	leaf, err := s.leafLocked(leafID)
	var path []*node
	if err == nil && leaf != nil {
		path = s.pathLocked(leaf)
	}
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(path))
	for i, n := range path {
		out[i] = n.entry()
	}
	return out, nil
}

func (s *Session) leafLocked(id string) (*node, error) {
	if id == "" {
		if len(s.nodes) == 0 {
			return nil, nil
		}
		return s.nodes[len(s.nodes)-1], nil
	}
	n := s.byID[id]
	if n == nil {
		return nil, fmt.Errorf("session: %s: entry %s not found", s.path, id)
	}
	return n, nil
}

// Leaf returns pi's default leaf: the last entry in file order ("" if none).
func (s *Session) Leaf() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.nodes) == 0 {
		return ""
	}
	return s.nodes[len(s.nodes)-1].id
}

// Heads returns each chat location's head: the last entry in file order
// belonging to it (an entry belongs to its pibot.loc, else to its parent's).
func (s *Session) Heads() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]string, len(s.heads))
	for loc, n := range s.heads {
		out[loc] = n.id
	}
	return out
}

// Head returns the head of one location.
func (s *Session) Head(loc string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n, ok := s.heads[loc]
	if !ok {
		return "", false
	}
	return n.id, true
}

// EntryForMsg returns the entry written for a platform message ref.
func (s *Session) EntryForMsg(msg string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.msgs[msg]
	return id, ok
}

// Name returns the session name (last session_info, trimmed; "" if none).
func (s *Session) Name() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.name
}

// Label is an entry's current label.
type Label struct {
	Label     string `json:"label"`
	Timestamp string `json:"labelTimestamp"`
}

// Labels returns the current labels by target entry id.
func (s *Session) Labels() map[string]Label {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]Label, len(s.labels))
	for id, l := range s.labels {
		out[id] = Label{Label: l.label, Timestamp: l.ts}
	}
	return out
}

// Node is one node of Tree.
type Node struct {
	Entry          Entry
	Children       []*Node
	Label          string
	LabelTimestamp string
}

// Tree returns the roots in file order (entries with no parent, their own
// id as parent, or an unknown parent), children sorted by timestamp.
func (s *Session) Tree() []*Node {
	type item struct {
		n   *node
		out *Node
	}
	// Build the skeleton under the lock; decode entries after it.
	var all []item
	var roots []*Node
	s.mu.RLock()
	mk := func(n *node) *Node {
		l := s.labels[n.id]
		out := &Node{Label: l.label, LabelTimestamp: l.ts}
		all = append(all, item{n, out})
		return out
	}
	var stack []item
	for _, n := range s.nodes {
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
	s.mu.RUnlock()
	for _, it := range all {
		it.out.Entry = it.n.entry() // raw, ent and parent never change once indexed
	}
	return roots
}
