package session

import (
	"maps"
	"sync"
)

// Indexes keeps the indexes of closed sessions that were opened lazily
// (Options.Lazy), so that opening one of them again reads only the lines
// appended to its file since (after checking that the file still holds
// what was indexed). It keeps those of at least minEntries entries, at
// most maxEntries entries in all, dropping the least recently kept first;
// an index costs about what the open session's tree costs without its
// messages. It is safe for concurrent use; a nil *Indexes keeps nothing.
type Indexes struct {
	min, max int

	mu    sync.Mutex
	kept  map[string]*keptIndex
	total int    // entries kept
	seq   uint64 // orders kept indexes by age
}

// keptIndex is the tree of a closed session, detached from every reader.
type keptIndex struct {
	tree *Tree
	seq  uint64
}

// NewIndexes returns an empty Indexes keeping the indexes of sessions of
// at least minEntries entries, at most maxEntries entries in all.
func NewIndexes(minEntries, maxEntries int) *Indexes {
	return &Indexes{min: minEntries, max: maxEntries, kept: map[string]*keptIndex{}}
}

// Len returns how many indexes are kept and their entries.
func (x *Indexes) Len() (indexes, entries int) {
	if x == nil {
		return 0, 0
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.kept), x.total
}

// take removes and returns the index kept of path, if any.
func (x *Indexes) take(path string) *keptIndex {
	if x == nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	k := x.kept[path]
	if k != nil {
		delete(x.kept, path)
		x.total -= len(k.tree.nodes)
	}
	return k
}

// drop forgets k, the index kept of path, unless another replaced it.
func (x *Indexes) drop(path string, k *keptIndex) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.kept[path] == k {
		delete(x.kept, path)
		x.total -= len(k.tree.nodes)
	}
}

// put keeps t, the detached tree of path, when it is large enough and
// fits, dropping the oldest others to make room.
func (x *Indexes) put(path string, t *Tree) { x.keep(path, t, true) }

// keep is put; a tree kept for the Open about to follow (not closed) is
// kept whatever its size, the others dropped to make room (that Open
// takes it).
func (x *Indexes) keep(path string, t *Tree, closed bool) {
	if x == nil || (closed && (len(t.nodes) < x.min || len(t.nodes) > x.max)) {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if old := x.kept[path]; old != nil {
		x.total -= len(old.tree.nodes)
		delete(x.kept, path)
	}
	for len(x.kept) > 0 && x.total+len(t.nodes) > x.max {
		var oldest string
		var seq uint64
		for p, k := range x.kept {
			if oldest == "" || k.seq < seq {
				oldest, seq = p, k.seq
			}
		}
		x.total -= len(x.kept[oldest].tree.nodes)
		delete(x.kept, oldest)
	}
	x.seq++
	x.kept[path] = &keptIndex{tree: t, seq: x.seq}
	x.total += len(t.nodes)
}

// detach returns a copy of the lazily loaded tree t whose file is now
// size bytes long, holding no message's line and sharing no node with t
// (readers may still hold t): the index an Indexes keeps. The entries
// appended since the load must fill the file from t.end to size (nil
// otherwise). The caller holds no lock; appends are over.
func (t *Tree) detach(size int64) *Tree {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.src == nil || t.src.changed.Load() {
		return nil
	}
	off := t.end
	for _, n := range t.nodes[t.loaded:] {
		off += int64(len(n.raw)) + 1
	}
	if off != size {
		return nil
	}
	slab := make([]node, len(t.nodes))
	nodes := make([]*node, len(t.nodes))
	kids := 0
	for i := range t.nodes {
		nodes[i] = &slab[i]
		kids += len(t.nodes[i].children)
	}
	// The children of every node share one array, each with no room to
	// grow into the next node's (an append copies).
	all := make([]*node, 0, kids)
	off = t.end
	fence := t.maxFence
	for i, n := range t.nodes {
		c := nodes[i]
		c.raw, c.typ, c.id, c.parentID, c.ts, c.line, c.index = n.raw, n.typ, n.id, n.parentID, n.ts, n.line, n.index
		c.off, c.size, c.sum = n.off, n.size, n.sum
		c.meta, c.fence, c.loc, c.role, c.provider, c.model, c.msg, c.ent = n.meta, n.fence, n.loc, n.role, n.provider, n.model, n.msg, n.ent
		if i >= t.loaded { // appended: its line is in the file now
			c.off, c.size, c.sum = off, uint32(len(n.raw)), lineSum(n.raw)
			off += int64(len(n.raw)) + 1
			fence = max(fence, n.fence)
		}
		if c.typ == TypeMessage {
			c.raw = nil
		}
		if n.parent != nil {
			c.parent = nodes[n.parent.index]
		}
		from := len(all)
		for _, k := range n.children {
			all = append(all, nodes[k.index])
		}
		c.children = all[from:len(all):len(all)]
	}
	d := &Tree{path: t.path, header: t.header, src: &bodySource{storage: t.src.storage, path: t.src.path}, nodes: nodes, byID: make(map[string]*node, len(nodes)),
		end: size, loaded: len(nodes), maxFence: fence}
	for _, n := range nodes {
		d.byID[n.id] = n
	}
	d.st = replayState{labels: maps.Clone(t.st.labels), name: t.st.name, heads: make(map[string]*node, len(t.st.heads)), msgs: maps.Clone(t.st.msgs)}
	for loc, n := range t.st.heads {
		d.st.heads[loc] = nodes[n.index]
	}
	return d
}

// endOf is where the lines t indexed from its file end.
func (t *Tree) endOf() int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.end
}
