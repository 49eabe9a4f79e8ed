package session

import "sync"

// Indexes keeps the indexes of closed sessions that were opened lazily
// (Options.Lazy), so that opening one of them again reads only the lines
// appended to its file since (after checking that the file still holds
// what was indexed). It keeps those of at least minEntries entries, at
// most maxEntries entries in all, dropping the least recently kept first;
// an index is kept in flat arrays (about 100 bytes an entry; the open
// session's tree costs about 400). It is safe for concurrent use; a nil *Indexes keeps nothing.
type Indexes struct {
	min, max int
	dir      string // where indexes are saved ("": nowhere; NewSavedIndexes)

	mu    sync.Mutex
	kept  map[string]*keptIndex
	total int    // entries kept
	seq   uint64 // orders kept indexes by age
}

// keptIndex is what an Indexes keeps of one file: the flat index of a
// closed session, or the tree loaded for the Open about to follow.
type keptIndex struct {
	tree *Tree      // loaded for the Open that follows (loadFence)
	flat *flatIndex // of a closed session (tree is nil)
	seq  uint64
}

// len returns the entries k indexes.
func (k *keptIndex) len() int {
	if k.tree != nil {
		return len(k.tree.nodes)
	}
	return k.flat.len()
}

// covered returns where the lines k indexed end in the file, and bare
// nodes of its first and last entries (where their lines are) for a
// reopen to read them again.
func (k *keptIndex) covered() (int64, []node) {
	if k.flat != nil {
		return k.flat.end, k.flat.checked()
	}
	t := k.tree
	var check []node
	if len(t.nodes) > 0 {
		for _, n := range []*node{t.nodes[0], t.nodes[len(t.nodes)-1]} {
			check = append(check, node{id: n.id, off: n.off, size: n.size, sum: n.sum})
		}
	}
	return t.end, check
}

// maxFence returns the highest fence of the lines k indexed.
func (k *keptIndex) maxFence() int64 {
	if k.flat != nil {
		return k.flat.maxFence
	}
	return k.tree.maxFence
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
		x.total -= k.len()
	}
	return k
}

// drop forgets k, the index kept of path, unless another replaced it.
func (x *Indexes) drop(path string, k *keptIndex) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.kept[path] == k {
		delete(x.kept, path)
		x.total -= k.len()
	}
}

// put keeps d, the flat index of the closed session of path, when it is
// large enough and fits, dropping the oldest others to make room.
func (x *Indexes) put(path string, d *flatIndex) { x.keep(path, &keptIndex{flat: d}, true) }

// keep is put of k; a tree kept for the Open about to follow (not
// closed) is kept whatever its size, the others dropped to make room
// (that Open takes it).
func (x *Indexes) keep(path string, k *keptIndex, closed bool) {
	n := k.len()
	if x == nil || (closed && (n < x.min || n > x.max)) {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if old := x.kept[path]; old != nil {
		x.total -= old.len()
		delete(x.kept, path)
	}
	for len(x.kept) > 0 && x.total+n > x.max {
		var oldest string
		var seq uint64
		for p, k := range x.kept {
			if oldest == "" || k.seq < seq {
				oldest, seq = p, k.seq
			}
		}
		x.total -= x.kept[oldest].len()
		delete(x.kept, oldest)
	}
	x.seq++
	k.seq = x.seq
	x.kept[path] = k
	x.total += n
}

// detach returns the flat index of the lazily loaded tree t, whose file
// is now size bytes long, holding no message's line (readers may still
// hold t): what an Indexes keeps. The entries appended since the load must
// fill the file from t.end to size (nil otherwise). The caller holds no
// lock; appends are over.
func (t *Tree) detach(size int64) *flatIndex {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.src == nil || t.src.changed.Load() || !fits(t.nodes) {
		return nil
	}
	off := t.end
	for _, n := range t.nodes[t.loaded:] {
		off += int64(len(n.raw)) + 1
	}
	if off != size {
		return nil
	}
	b := newFlatBuilder(len(t.nodes))
	off = t.end
	fence := t.maxFence
	for i, n := range t.nodes {
		at, length, sum := n.off, n.size, n.sum
		if i >= t.loaded { // appended: its line is in the file now
			at, length, sum = off, uint32(len(n.raw)), lineSum(n.raw)
			off += int64(len(n.raw)) + 1
			fence = max(fence, n.fence)
		}
		parent, pid := int32(-1), uint32(0)
		if n.parent != nil {
			parent = int32(n.parent.index)
		}
		switch {
		case n.parentID == "":
		case n.parent != nil && n.parent.index < i && n.parentID == n.parent.id:
			pid = b.x.ents[n.parent.index].id // the parent's id, not stored twice
		default:
			pid = b.str(n.parentID)
		}
		b.add(n, parent, pid, at, length, sum)
	}
	x := b.done()
	if x == nil {
		return nil
	}
	x.header, x.end, x.maxFence, x.savedEnd = t.header, size, fence, t.savedEnd
	return x
}

// endOf is where the lines t indexed from its file end.
func (t *Tree) endOf() int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.end
}
