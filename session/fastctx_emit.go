package session

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"sync"
)

// validate scans completely, like the full loader, every line of the path
// the answer depends on, checks each says what its envelope said and keeps
// its node (without the line for a message, with its entry decoded
// otherwise): every entry that is not a message, the messages the context
// emits, and the messages after the last entry that sets the model. It
// returns those nodes in path order with their line indexes; leaving out
// the others changes nothing buildContext computes.
func (x *fastCtx) validate(path []int) ([]*node, []int, error) {
	nodes := make([]*node, len(path)) // nil until scanned
	done := make([]bool, len(path))
	need := make([]bool, len(path))
	for i, li := range path {
		need[i] = !x.lines[li].msg
	}
	if err := x.scanNodes(path, nodes, need, done); err != nil {
		return nil, nil, err
	}
	// Of the thinking level and model changes and compactions the last
	// one counts.
	last := map[string]int{}
	for i, n := range nodes {
		if n != nil {
			last[n.typ] = i
		}
	}
	for _, typ := range []string{TypeThinkingLevelChange, TypeModelChange, TypeCompaction} {
		if i, ok := last[typ]; ok {
			decode(nodes[i])
		}
	}
	from, to := x.emitted(path, nodes)
	for i, li := range path {
		emits := i >= to || i >= from && i < to-1
		need[i] = x.lines[li].msg && emits
		if n := nodes[i]; emits && n != nil && (n.typ == TypeCustomMessage || n.typ == TypeBranchSummary) {
			decode(n)
		}
	}
	if err := x.scanNodes(path, nodes, need, done); err != nil {
		return nil, nil, err
	}
	// The model is set by the last model change or assistant message.
	for i := len(path) - 1; i >= 0; i-- {
		if !done[i] {
			nodes[i], done[i] = &node{}, true
			win := x.window(0)
			err := x.scanNode(&x.lines[path[i]], nodes[i], win, x.lines[path[i]].n)
			x.st.Read, win.read = x.st.Read+win.read, 0
			if err != nil {
				return nil, nil, err
			}
		}
		if n := nodes[i]; n.typ == TypeModelChange || n.typ == TypeMessage && n.role == "assistant" {
			break
		}
	}
	// A message the answer does not hold is not read, as long as losing
	// it, were it damaged, would change nothing: the full loader would
	// re-attach its child to the entry before it in the file, which must
	// then be its parent, and no other entry may have its id.
	for i, li := range path {
		need[i] = false
		if done[i] {
			continue
		}
		first := i == 0 && li == 0 || i > 0 && path[i-1] == li-1
		need[i] = x.dups[x.lines[li].id] || !first || i+1 >= len(path) || path[i+1] != li+1
	}
	if err := x.scanNodes(path, nodes, need, done); err != nil {
		return nil, nil, err
	}
	var ptrs []*node
	var lis []int
	for i := range nodes {
		if done[i] {
			ptrs, lis = append(ptrs, nodes[i]), append(lis, path[i])
		}
	}
	return ptrs, lis, nil
}

// emitted returns the part of the path whose messages the context emits,
// where only the entries that are not messages are scanned yet: every
// message from index from up to the compaction at index to-1, and every
// message after it (from 0, to 0 without a compaction). Messages are
// matched to the compaction's first kept entry by the hash of their id.
func (x *fastCtx) emitted(path []int, nodes []*node) (from, to int) {
	last := -1
	for i := range nodes {
		if nodes[i] != nil && nodes[i].typ == TypeCompaction {
			last = i
		}
	}
	if last < 0 {
		return 0, 0
	}
	comp := nodes[last]
	c := last
	for i := range nodes { // pi finds the compaction by id: the first wins
		if nodes[i] != nil && nodes[i].typ == TypeCompaction && nodes[i].id == comp.id {
			c = i
			break
		}
	}
	kept := maphash.String(x.seed, comp.ent.FirstKeptEntryID)
	for i := range c {
		if x.lines[path[i]].msg && x.lines[path[i]].id == kept || !x.lines[path[i]].msg && nodes[i].id == comp.ent.FirstKeptEntryID {
			return i, c + 1
		}
	}
	return c, c + 1
}

// scanNodes scans the lines of the path selected by need that are not
// done yet. Many bytes are split between goroutines, all finished before
// it returns.
func (x *fastCtx) scanNodes(path []int, nodes []*node, need, done []bool) error {
	var total int64
	count := 0
	for i, li := range path {
		if need[i] && !done[i] {
			total += x.lines[li].n
			count++
		}
	}
	slab := make([]node, count) // one allocation for the nodes
	// reach[i]: how far from line i a read goes: to the end of the last
	// line needed within a window's size, not over gaps of lines not needed.
	// Both j (the last such line seen) and k (the next line to look at)
	// only move forward.
	reach := make([]int64, len(path))
	j, k := 0, 0
	for i := range path {
		if !need[i] || done[i] {
			continue
		}
		nodes[i], slab = &slab[0], slab[1:]
		off := x.lines[path[i]].off
		j, k = max(j, i), max(k, i)
		for ; k < len(path) && x.lines[path[k]].off+x.lines[path[k]].n-off <= windowSize; k++ {
			if need[k] && !done[k] && x.lines[path[k]].kept == 0 {
				j = k
			}
		}
		reach[i] = x.lines[path[j]].off + x.lines[path[j]].n - off
	}
	workers := 1
	if total >= x.sizes.parallel {
		workers = min(runtime.GOMAXPROCS(0), 4)
	}
	errs := make([]error, workers)
	wins := make([]*window, workers)
	var wg sync.WaitGroup
	from := 0
	per := total/int64(workers) + 1
	for w := range workers {
		to := from
		for sum := int64(0); to < len(path) && (sum < per || w == workers-1); to++ {
			if need[to] && !done[to] {
				sum += x.lines[path[to]].n
			}
		}
		wins[w] = x.window(w)
		lo, hi, win := from, to, wins[w]
		scan := func() {
			for i := lo; i < hi && errs[w] == nil; i++ {
				if need[i] && !done[i] {
					errs[w] = x.scanNode(&x.lines[path[i]], nodes[i], win, reach[i])
					done[i] = true
				}
			}
		}
		if workers == 1 {
			scan()
		} else {
			wg.Go(scan)
		}
		from = to
	}
	wg.Wait()
	for _, w := range wins {
		x.st.Read += w.read
		w.read = 0
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// scanNode scans one line into n.
func (x *fastCtx) scanNode(e *envLine, n *node, win *window, reach int64) error {
	var line []byte
	if e.kept != 0 {
		line = x.arena[e.kept-1 : int64(e.kept-1)+e.n]
	} else {
		var err error
		if line, err = win.at(e.off, e.n, reach); err != nil {
			return notFast(err.Error())
		}
	}
	if err := scanLineInto(n, line); err != nil {
		return notFast(fmt.Sprintf("entry at byte %d: %v", e.off, err))
	}
	if maphash.String(x.seed, n.id) != e.id || (n.parentID == "") != e.root ||
		(!e.root && maphash.String(x.seed, n.parentID) != e.parent) || n.fence != e.fence ||
		(n.typ == TypeMessage) != e.msg || (n.typ == TypeSession) != e.session {
		return notFast(fmt.Sprintf("entry at byte %d: its envelope is not what its prefix said", e.off))
	}
	if n.typ == TypeMessage {
		n.raw = nil // copied from the file again when emitted
		return nil
	}
	if e.kept == 0 {
		line = bytes.Clone(line) // the window's bytes change
	}
	n.raw = line
	n.ent = &Entry{Type: n.typ, ID: n.id, ParentID: n.parentID, Timestamp: n.ts} // see decode
	return nil
}

// decode decodes the entry of a scanned node that is not a message, for
// the entries whose fields buildContext reads (the others keep the
// envelope only).
func decode(n *node) {
	if ent, err := decodeEntry(n.raw); err == nil {
		n.ent = &ent
	}
}

// emit writes the context of the validated path, copying each stored
// message from the file.
func (x *fastCtx) emit(w io.Writer, ptrs []*node, path []int) error {
	win := x.window(0)
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	cw.writeString(`{"messages":[`)
	first := true
	var rerr error
	thinking, model := buildContext(ptrs, func(k int, derived []byte) {
		if !first {
			cw.writeString(",")
		}
		first = false
		if k < 0 {
			cw.write(derived)
			return
		}
		n, e := ptrs[k], &x.lines[path[k]]
		b, err := win.at(e.off+int64(n.msg[0]), int64(n.msg[1]-n.msg[0]), windowSize)
		if err != nil && rerr == nil {
			rerr = err
		}
		cw.write(b)
	})
	err := writeContextTail(cw, thinking, model)
	cw.writeString("\n")
	if cw.err == nil {
		cw.err = bw.Flush()
	}
	x.st.Out = cw.n
	x.st.Read += win.read
	switch {
	case rerr != nil:
		return fmt.Errorf("session: context: %w", rerr)
	case err != nil:
		return err
	}
	return cw.err
}
