package session

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"
)

// envelope is what the index keeps of one scanned line.
type envelope struct {
	blank, header bool
	version       int  // header only
	session       bool // an entry of type "session": not a tree node
	msg           bool // an entry of type "message"
	fence         int64
	id, parent    uint64
	root          bool
}

// scan parses the envelope of one line without side effects. The header
// (the first non-blank line: header is true) is scanned and decoded whole. An entry is
// scanned up to a top-level "message" object, whose start is returned
// (-1 when the whole line was scanned).
func (x *fastCtx) scan(line []byte, header bool) (envelope, int, error) {
	if (len(line) == 0 || line[0] != '{') && len(bytes.Trim(line, " \t\r")) == 0 {
		return envelope{blank: true}, -1, nil
	}
	if header {
		if _, err := scanLine(line); err != nil {
			return envelope{}, -1, notFast("header: " + err.Error())
		}
		h, err := decodeHeader(line)
		if err != nil {
			return envelope{}, -1, notFast("header: " + err.Error())
		}
		return envelope{header: true, version: h.Version}, -1, nil
	}
	if id, parent, stop, ok := piPrefix(line); ok {
		e := envelope{msg: true}
		e.id, _ = x.hashString(id)
		e.parent, e.root = x.hashString(parent)
		return e, stop, nil
	}
	var typ, id, parent, fence []byte
	stop := -1
	i, err := scanMembers(line, func(key []byte, esc bool, vs int) (int, bool) {
		if !esc && string(key) == "message" && line[vs] == '{' {
			stop = vs
			return 0, true
		}
		ve, err := skipValue(line, vs)
		if err != nil {
			return -1, false
		}
		if esc {
			key = []byte(member{key: key, keyEsc: true}.keyString())
		}
		switch string(key) {
		case "type":
			typ = line[vs:ve]
		case "id":
			id = line[vs:ve]
		case "parentId":
			parent = line[vs:ve]
		case "fence":
			fence = line[vs:ve]
		}
		return ve, false
	})
	if err != nil {
		return envelope{}, -1, err
	}
	if stop < 0 && skipWS(line, i) != len(line) {
		return envelope{}, -1, errSyntax
	}
	var e envelope
	if s, ok := rawString(typ); ok {
		e.session, e.msg = s == TypeSession, s == TypeMessage
	}
	e.id, _ = x.hashString(id)
	var empty bool
	e.parent, empty = x.hashString(parent)
	e.root = empty
	if len(fence) > 0 {
		e.fence, _ = rawInt(fence)
	}
	return e, stop, nil
}

// piPrefix reads the envelope of a message line in the layout pi writes,
// {"type":"message","id":"…","parentId":"…"|null,"timestamp":"…","message":{,
// with plain strings (no escapes): the id and parentId values as raw JSON
// and where the message starts. ok is false for any other shape (the
// general scan reads it).
func piPrefix(line []byte) (id, parent []byte, stop int, ok bool) {
	const start = `{"type":"message","id":`
	if !bytes.HasPrefix(line, []byte(start)) {
		return nil, nil, 0, false
	}
	i := len(start)
	if id, i = plainString(line, i); id == nil || !bytes.HasPrefix(line[i:], []byte(`,"parentId":`)) {
		return nil, nil, 0, false
	}
	i += len(`,"parentId":`)
	if bytes.HasPrefix(line[i:], []byte("null")) {
		parent, i = line[i:i+4], i+4
	} else if parent, i = plainString(line, i); parent == nil {
		return nil, nil, 0, false
	}
	if !bytes.HasPrefix(line[i:], []byte(`,"timestamp":`)) {
		return nil, nil, 0, false
	}
	var ts []byte
	if ts, i = plainString(line, i+len(`,"timestamp":`)); ts == nil || !bytes.HasPrefix(line[i:], []byte(`,"message":{`)) {
		return nil, nil, 0, false
	}
	return id, parent, i + len(`,"message":`), true
}

// plainString returns the JSON string at b[i] (quotes included) and the
// index after it, or nil when there is none or it has an escape or a
// control character.
func plainString(b []byte, i int) ([]byte, int) {
	if i >= len(b) || b[i] != '"' {
		return nil, i
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i : j+1], j + 1
		case c == '\\' || c < 0x20:
			return nil, i
		}
	}
	return nil, i
}

// scanMembers walks the members of the object that starts line, calling
// fn with each key and the start of its value; fn returns the end of the
// value (-1: invalid), or stop to end the walk there. It returns the index
// after the object.
func scanMembers(b []byte, fn func(key []byte, esc bool, vs int) (int, bool)) (int, error) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, errSyntax
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return 0, errSyntax
		}
		ke, esc, err := scanString(b, i)
		if err != nil {
			return 0, err
		}
		key := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, errSyntax
		}
		vs := skipWS(b, i+1)
		if vs >= len(b) {
			return 0, errSyntax
		}
		ve, stop := fn(key, esc, vs)
		if stop {
			return vs, nil
		}
		if ve < 0 {
			return 0, errSyntax
		}
		i = skipWS(b, ve)
		if i >= len(b) {
			return 0, errSyntax
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return i + 1, nil
		default:
			return 0, errSyntax
		}
	}
}

// hashString hashes the string a raw JSON value decodes to ("" for a
// non-string, like the full loader) and says whether it is empty.
func (x *fastCtx) hashString(v []byte) (uint64, bool) {
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		inner := v[1 : len(v)-1]
		return maphash.Bytes(x.seed, inner), len(inner) == 0
	}
	s, _ := rawString(v)
	return maphash.String(x.seed, s), s == ""
}

// trailingFence reads a fence written after the message (`,"fence":N}` at
// the end of t, which ends with '}'), as pibot did before it wrote it in
// front: in a valid line that can only be the top-level member.
func trailingFence(t []byte) (int64, bool) {
	t = t[:len(t)-1]
	j := len(t)
	for j > 0 && (isDigit(t[j-1]) || bytes.IndexByte([]byte("-+.eE"), t[j-1]) >= 0) {
		j--
	}
	if j == len(t) || !bytes.HasSuffix(t[:j], []byte(`,"fence":`)) {
		return 0, false
	}
	v, _ := rawInt(t[j:])
	return v, true
}

// path returns the indexes (into x.lines) from the root to the leaf.
func (x *fastCtx) path(leafID string) ([]int, error) {
	if len(x.lines) == 0 {
		if leafID == "" {
			return nil, nil
		}
		return nil, notFast("no entries")
	}
	dups := x.duplicates()
	last := func(h uint64, from int) int {
		for from >= 0 && x.lines[from].id != h {
			from--
		}
		return from
	}
	leaf := len(x.lines) - 1
	if leafID != "" {
		if leaf = last(maphash.String(x.seed, leafID), leaf); leaf < 0 {
			return nil, notFast("leaf not found")
		}
	}
	path := []int{leaf}
	for k := leaf; !x.lines[k].root; {
		want := x.lines[k].parent
		j := k - 1
		if dups[want] {
			j = len(x.lines) - 1
		}
		j = last(want, j)
		if j < 0 && last(want, len(x.lines)-1) < 0 {
			// No entry has that id: a root, unless a damaged line comes
			// before it (the full loader re-attaches it then).
			if err := x.cleanBefore(k); err != nil {
				return nil, err
			}
			break
		}
		if j < 0 || j >= k {
			return nil, notFast(fmt.Sprintf("entry at byte %d: its parent is not an earlier entry", x.lines[k].off))
		}
		path = append(path, j)
		k = j
	}
	slices.Reverse(path)
	return path, nil
}

// duplicates returns the id hashes more than one entry has (and, rarely,
// a few that only share their low bits with another: harmless, as they
// are only looked up from the end). An open-addressing set: cheaper than
// sorting the ids.
func (x *fastCtx) duplicates() map[uint64]bool {
	size := 1
	for size < 2*len(x.lines) {
		size <<= 1
	}
	tab := make([]uint64, size)
	mask := uint64(size - 1)
	var dups map[uint64]bool
	for i := range x.lines {
		h := x.lines[i].id | 1 // 0 marks a free slot
		for j := h & mask; ; j = (j + 1) & mask {
			if tab[j] == 0 {
				tab[j] = h
				break
			}
			if tab[j] == h {
				if dups == nil {
					dups = map[uint64]bool{}
				}
				dups[x.lines[i].id] = true
				break
			}
		}
	}
	return dups
}

// cleanBefore scans every entry line before x.lines[k] completely and
// falls back if one is damaged.
func (x *fastCtx) cleanBefore(k int) error {
	win := x.window(0)
	defer func() { x.st.Read, win.read = x.st.Read+win.read, 0 }()
	for i := range k {
		e := &x.lines[i]
		if !e.partial {
			continue // scanned whole by the index
		}
		line, err := win.at(e.off, e.n, windowSize)
		if err != nil {
			return notFast(err.Error())
		}
		if _, err := scanLine(line); err != nil {
			return notFast(fmt.Sprintf("entry at byte %d: %v (before an entry whose parent is missing)", e.off, err))
		}
	}
	return nil
}

// window reads a file through one buffer, for offsets that mostly grow.
type window struct {
	f    *os.File
	buf  []byte
	off  int64
	n    int
	read time.Duration
}

// at returns the n bytes at off, valid until the next call. When it has
// to read, it reads reach bytes (at least n, at most the buffer if that
// is larger than n): callers that know where the next lines they need
// end spare reading what lies between.
func (w *window) at(off, n, reach int64) ([]byte, error) {
	if off >= w.off && off+n <= w.off+int64(w.n) {
		s := off - w.off
		return w.buf[s : s+n], nil
	}
	if int64(len(w.buf)) < n {
		w.buf = make([]byte, n)
	}
	reach = min(max(reach, n), int64(len(w.buf)))
	t := time.Now()
	m, err := w.f.ReadAt(w.buf[:reach], off)
	w.read += time.Since(t)
	if int64(m) < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read at byte %d: %w", off, err)
	}
	w.off, w.n = off, m
	return w.buf[:n], nil
}

const windowSize = 1 << 20

// window returns window i, made on first use; windows keep their buffer
// and contents between the passes.
func (x *fastCtx) window(i int) *window {
	for len(x.wins) <= i {
		x.wins = append(x.wins, &window{f: x.f, buf: make([]byte, windowSize)})
	}
	return x.wins[i]
}

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
	reach := make([]int64, len(path))
	j := 0
	for i := range path {
		if !need[i] || done[i] {
			continue
		}
		nodes[i], slab = &slab[0], slab[1:]
		off := x.lines[path[i]].off
		j = max(j, i)
		for k := j; k < len(path) && x.lines[path[k]].off+x.lines[path[k]].n-off <= windowSize; k++ {
			if need[k] && !done[k] && x.lines[path[k]].kept == 0 {
				j = k
			}
		}
		reach[i] = x.lines[path[j]].off + x.lines[path[j]].n - off
	}
	workers := 1
	if total >= parallelMin {
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
		(!e.root && maphash.String(x.seed, n.parentID) != e.parent) || n.fence != e.fence || (n.typ == TypeMessage) != e.msg {
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
