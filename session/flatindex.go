package session

import (
	"encoding/binary"
	"math"
)

// flatIndex is the index of a closed, lazily loaded session in flat
// arrays: one fixed-size record an entry, their strings in one arena
// (ids, timestamps, the pibot fields), and the few distinct kinds and
// fences, the pibot fields and the lines of the entries that are not
// messages in side tables. It is what an Indexes keeps of an evicted
// session (about 100 bytes an entry where its Tree costs about 400) and
// what it saves to disk; tree builds the Tree again. It is never changed
// once built.
type flatIndex struct {
	header   Header
	end      int64 // where the indexed lines end in the file
	maxFence int64 // the highest fence of the indexed lines
	ents     []flatEntry
	// arena holds the strings the records refer to (a ref is an offset):
	// each is its length (uvarint) and its bytes; arena[0] is 0, the
	// empty string.
	arena  string
	kinds  []flatKind
	metas  []flatMeta  // [0]: no pibot field
	fences []int64     // [0]: 0
	extras []flatExtra // [0]: none
	// savedEnd is how much of the file the index saved of it covers
	// (0: none known).
	savedEnd int64
	// stamp says what the file was when the index was saved or read
	// from disk (nil for one kept in memory only).
	stamp *fileStamp
}

// flatEntry is one entry of a flatIndex. Its strings are refs into the
// arena; kind, meta, fence and extra are indexes into the side tables.
type flatEntry struct {
	off       int64 // where the line starts in the file
	id, pid   uint32
	ts, line  uint32
	size, sum uint32 // the line's length (no newline) and lineSum
	msg0      uint32 // the span of the message object in the line
	msg1      uint32
	kind      uint32
	meta      uint32
	fence     uint32
	extra     uint32
	parent    int32 // index of the resolved parent; -1: none
}

// flatKind is an entry's type and, for a message, its role, provider
// and model: a flatIndex holds each distinct one once.
type flatKind struct{ typ, role, provider, model string }

// flatMeta is the pibot field of an entry (refs into the arena).
type flatMeta struct{ loc, msg, from uint32 }

// flatExtra is the line of an entry that is not a message, and its
// decoded entry (nil: decoded again when the tree is built).
type flatExtra struct {
	raw []byte
	ent *Entry
}

// flatBuilder builds a flatIndex.
type flatBuilder struct {
	x        *flatIndex
	arena    []byte
	interned map[string]uint32
	kinds    map[flatKind]uint32
	fences   map[int64]uint32
}

func newFlatBuilder(n int) *flatBuilder {
	return &flatBuilder{
		x:        &flatIndex{ents: make([]flatEntry, 0, n), metas: []flatMeta{{}}, fences: []int64{0}, extras: []flatExtra{{}}},
		arena:    make([]byte, 1, 1+n*36),
		interned: map[string]uint32{},
		kinds:    map[flatKind]uint32{},
		fences:   map[int64]uint32{0: 0},
	}
}

// str adds s to the arena and returns its ref.
func (b *flatBuilder) str(s string) uint32 {
	if s == "" {
		return 0
	}
	ref := uint32(len(b.arena))
	b.arena = binary.AppendUvarint(b.arena, uint64(len(s)))
	b.arena = append(b.arena, s...)
	return ref
}

// intern is str for the strings many entries share.
func (b *flatBuilder) intern(s string) uint32 {
	if ref, ok := b.interned[s]; ok {
		return ref
	}
	ref := b.str(s)
	b.interned[s] = ref
	return ref
}

// add appends the record of n, whose parent is at index parent (-1:
// none) and whose line is at off, size bytes long, with sum sum.
func (b *flatBuilder) add(n *node, parent int32, pid uint32, off int64, size, sum uint32) {
	k := flatKind{typ: n.typ, role: n.role, provider: n.provider, model: n.model}
	kind, ok := b.kinds[k]
	if !ok {
		kind = uint32(len(b.x.kinds))
		b.x.kinds = append(b.x.kinds, k)
		b.kinds[k] = kind
	}
	fence, ok := b.fences[n.fence]
	if !ok {
		fence = uint32(len(b.x.fences))
		b.x.fences = append(b.x.fences, n.fence)
		b.fences[n.fence] = fence
	}
	e := flatEntry{off: off, id: b.str(n.id), pid: pid, ts: b.str(n.ts), line: uint32(n.line), size: size, sum: sum,
		msg0: uint32(n.msg[0]), msg1: uint32(n.msg[1]), kind: kind, fence: fence, parent: parent}
	if n.meta != nil {
		e.meta = uint32(len(b.x.metas))
		b.x.metas = append(b.x.metas, flatMeta{loc: b.intern(n.meta.Loc), msg: b.str(n.meta.Msg), from: b.intern(n.meta.From)})
	}
	if n.typ != TypeMessage {
		e.extra = uint32(len(b.x.extras))
		b.x.extras = append(b.x.extras, flatExtra{raw: n.raw, ent: n.ent})
	}
	b.x.ents = append(b.x.ents, e)
}

// done returns the index, nil when its arena outgrew its refs.
func (b *flatBuilder) done() *flatIndex {
	if len(b.arena) > math.MaxUint32 {
		return nil
	}
	b.x.arena = string(b.arena)
	return b.x
}

// fits reports whether the line numbers, spans and counts of t's nodes
// fit a flatIndex's records.
func fits(nodes []*node) bool {
	if len(nodes) >= math.MaxInt32 {
		return false
	}
	for _, n := range nodes {
		if n.line > math.MaxUint32 || n.msg[1] > math.MaxUint32 || n.msg[0] < 0 {
			return false
		}
	}
	return true
}

// str returns the string at ref.
func (x *flatIndex) str(ref uint32) string {
	if ref == 0 {
		return ""
	}
	n, at := uvarintAt(x.arena, int(ref))
	return x.arena[at : at+int(n)]
}

// uvarintAt decodes the uvarint at s[i] and returns it and the index
// after it (-1 when s ends first or it overflows).
func uvarintAt(s string, i int) (uint64, int) {
	var v uint64
	for shift := uint(0); i < len(s) && shift < 64; shift += 7 {
		c := s[i]
		i++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, i
		}
	}
	return 0, -1
}

// len returns the number of entries.
func (x *flatIndex) len() int { return len(x.ents) }

// checked returns the nodes, bare but for where their lines are, of
// the first and last entries, whose lines a reopen reads again to check
// that the file still holds them.
func (x *flatIndex) checked() []node {
	var out []node
	if len(x.ents) > 0 {
		for _, e := range []*flatEntry{&x.ents[0], &x.ents[len(x.ents)-1]} {
			out = append(out, node{id: x.str(e.id), off: e.off, size: e.size, sum: e.sum})
		}
	}
	return out
}

// tree builds the Tree of the index, reading its messages from src: what
// the detached tree was (newTree's links and replay, over the same
// entries in the same order).
func (x *flatIndex) tree(path string, src *bodySource) *Tree {
	slab := make([]node, len(x.ents))
	nodes := make([]*node, len(x.ents))
	kids := make([]int32, len(x.ents)+1)
	for i := range x.ents {
		nodes[i] = &slab[i]
		if p := x.ents[i].parent; p >= 0 {
			kids[p+1]++
		}
	}
	for i := 1; i < len(kids); i++ {
		kids[i] += kids[i-1] // kids[i]: where node i's children start
	}
	// The children of every node share one array, each with no room to
	// grow into the next node's (an append copies).
	all := make([]*node, kids[len(kids)-1])
	fill := make([]int32, len(x.ents))
	t := &Tree{path: path, header: x.header, src: src, nodes: nodes, byID: make(map[string]*node, len(nodes)),
		end: x.end, loaded: len(nodes), maxFence: x.maxFence, savedEnd: x.savedEnd,
		st: replayState{labels: map[string]labelState{}, heads: map[string]*node{}, msgs: map[string]string{}}}
	for i := range x.ents {
		e, n := &x.ents[i], nodes[i]
		k := &x.kinds[e.kind]
		n.typ, n.role, n.provider, n.model = k.typ, k.role, k.provider, k.model
		n.id, n.parentID, n.ts = x.str(e.id), x.str(e.pid), x.str(e.ts)
		n.line, n.index, n.off, n.size, n.sum = int(e.line), i, e.off, e.size, e.sum
		n.msg = [2]int{int(e.msg0), int(e.msg1)}
		n.fence = x.fences[e.fence]
		if e.meta != 0 {
			m := x.metas[e.meta]
			n.meta = &Meta{Loc: x.str(m.loc), Msg: x.str(m.msg), From: x.str(m.from)}
		}
		if e.extra != 0 {
			n.raw, n.ent = x.extras[e.extra].raw, x.extras[e.extra].ent
		}
		if e.parent >= 0 {
			p := nodes[e.parent]
			n.parent = p
			at := kids[e.parent] + fill[e.parent]
			all[at] = n
			fill[e.parent]++
		}
		n.children = all[kids[i]:kids[i+1]:kids[i+1]]
		t.byID[n.id] = n
	}
	for _, n := range nodes {
		t.st.apply(n)
	}
	return t
}
