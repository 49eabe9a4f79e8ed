package session

import (
	"errors"
	"fmt"
)

// openLazy is Open with Options.Lazy on a RangeStorage. ok is false when
// the full loader must open the file instead (see notLazy); nothing was
// changed then. An index opts.Indexes kept of the file serves when the
// file still holds what it indexed: only the lines appended since are
// read.
func openLazy(rs RangeStorage, path string, opts Options) (s *Session, ok bool, err error) {
	f, err := rs.OpenRange(path)
	if err != nil {
		return nil, false, fmt.Errorf("session: open %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, false, fmt.Errorf("session: open %s: %w", path, err)
	}
	var t *Tree
	var maxFence int64
	k := opts.Indexes.take(path)
	if k == nil {
		k = opts.Indexes.loadSaved(path, f, size)
	}
	if k != nil {
		t, maxFence, err = k.reopen(&bodySource{storage: rs, path: path}, f, size)
		if _, nl := errors.AsType[notLazy](err); err != nil && !nl {
			return nil, false, fmt.Errorf("session: open %s: %w", path, err)
		}
	}
	if t == nil {
		if t, err = loadIndex(rs, path, f, size); t == nil {
			return nil, false, err
		}
		maxFence = t.maxFence
	}
	t.src = &bodySource{storage: rs, path: path}
	s = newSession(rs, path, opts)
	s.report = Report{Path: path, FromVersion: t.header.Version}
	s.tree = t
	if opts.Fence != 0 && opts.Fence < maxFence {
		// A newer owner already wrote: this writer is stale from the start.
		s.w.fenced = fmt.Errorf("file has fence %d, writer has %d", maxFence, opts.Fence)
		s.w.waits.fail(&FencedError{Path: path, Cause: s.w.fenced})
	}
	if !opts.ReadOnly && s.w.fenced == nil {
		af, err := rs.OpenAppend(path)
		if err != nil {
			return nil, false, fmt.Errorf("session: open %s for append: %w", path, err)
		}
		if err := af.Sync(); err != nil {
			_ = af.Close()
			return nil, false, fmt.Errorf("session: %s: sync: %w", path, err)
		}
		s.w.file, s.w.size = af, size
		s.w.start()
	}
	return s, true, nil
}

// loadIndex loads the lazy tree of the file at path (f, size bytes): nil
// and no error when the full loader must open it instead (see notLazy).
func loadIndex(rs RangeStorage, path string, f RangeFile, size int64) (*Tree, error) {
	ld := &lazyLoad{}
	if err := ld.scan(f, 0, size); err != nil {
		if _, nl := errors.AsType[notLazy](err); nl {
			return nil, nil
		}
		return nil, fmt.Errorf("session: open %s: %w", path, err)
	}
	if !ld.headerSeen || ld.header.Version < CurrentVersion {
		return nil, nil
	}
	var rep Report
	t := newTree(path, ld.header, ld.nodes, &rep)
	if !rep.Clean() {
		return nil, nil // a parent loop: the full loader rewrites it
	}
	t.src, t.end, t.loaded, t.maxFence = &bodySource{storage: rs, path: path}, size, len(ld.nodes), ld.maxFence
	return t, nil
}

// reopen extends the kept index with the lines appended to its file (f,
// now size bytes) since it was kept, after checking that the file still
// holds its first and last entries' lines where it says. A notLazy error
// says the file must be loaded anew.
func (k *keptIndex) reopen(src *bodySource, f RangeFile, size int64) (*Tree, int64, error) {
	end, check := k.covered()
	if size < end {
		return nil, 0, notLazy("the file is shorter than its kept index")
	}
	br := bodyReader{src: src, f: f}
	for i := range check {
		if br.line(&check[i]) == nil {
			if errors.Is(br.err, ErrFileChanged) {
				return nil, 0, notLazy(br.err.Error())
			}
			return nil, 0, br.err
		}
	}
	t := k.tree
	if t == nil {
		t = k.flat.tree(src.path, src)
	}
	if size == t.end {
		return t, t.maxFence, nil
	}
	last := 0
	if len(t.nodes) > 0 {
		last = t.nodes[len(t.nodes)-1].line
	}
	ld := &lazyLoad{header: t.header, headerSeen: true, lineNo: last, maxFence: t.maxFence, first: len(t.nodes)}
	if err := ld.scan(f, t.end, size); err != nil {
		return nil, 0, err
	}
	if err := t.extend(ld.nodes); err != nil {
		return nil, 0, err
	}
	t.end, t.loaded, t.maxFence = size, len(t.nodes), ld.maxFence
	return t, ld.maxFence, nil
}

// extend links and replays nodes scanned from the lines appended to the
// file, as newTree would have over the whole file. A new entry whose id an
// earlier one has, or whose parent comes after it, could change the links
// of the entries already indexed (newTree resolves every parent over the
// whole file): then the file is loaded anew. The Tree is not shared yet.
func (t *Tree) extend(nodes []*node) error {
	for _, n := range nodes {
		if _, dup := t.byID[n.id]; dup {
			return notLazy(fmt.Sprintf("entry %s appended again", n.id))
		}
		t.byID[n.id] = n
	}
	for _, n := range nodes {
		if n.parentID == "" || n.parentID == n.id {
			continue
		}
		p := t.byID[n.parentID]
		if p == nil {
			continue
		}
		if p.index >= n.index {
			return notLazy(fmt.Sprintf("entry %s has a later parent", n.id))
		}
		n.parent = p
		p.children = append(p.children, n)
	}
	t.nodes = append(t.nodes, nodes...)
	for _, n := range nodes {
		t.st.apply(n)
	}
	return nil
}
