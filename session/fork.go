package session

import (
	"bytes"
	"fmt"
	"path/filepath"
)

// Fork writes a new session file in dir holding the root→leafID path of src
// ("" = src's default leaf), entries copied byte for byte (same ids,
// parents, timestamps and unknown fields). Unlike pi, label entries on the
// path stay in place, so no entry loses its parent; labels of path entries
// whose label entry is not on the path are re-appended after the leaf with
// their original timestamps, as pi does. The header gets a new id and
// parentSession = src's path.
func Fork(src *Session, leafID, dir string, opts Options) (*Session, error) {
	t := src.tree
	t.mu.RLock()
	path, err := t.branchLocked(leafID)
	if err != nil {
		t.mu.RUnlock()
		return nil, fmt.Errorf("session: fork: %w", err)
	}
	onPath := map[string]bool{}
	for _, n := range path {
		onPath[n.id] = true
	}
	// The label entry currently in effect for each labelled path entry.
	effective := map[string]*node{}
	for _, n := range t.nodes {
		if n.typ == TypeLabel && onPath[n.ent.TargetID] {
			effective[n.ent.TargetID] = n
		}
	}
	var extra []Entry
	for _, n := range path {
		l, ok := t.st.labels[n.id]
		if !ok {
			continue
		}
		if le := effective[n.id]; le != nil && onPath[le.id] {
			continue // the label entry is on the path itself
		}
		label := l.label
		extra = append(extra, Entry{Type: TypeLabel, TargetID: n.id, Label: &label, Timestamp: l.ts})
	}
	cwd := t.header.Cwd
	t.mu.RUnlock()
	return writeCopy(src, path, extra, dir, cwd, opts)
}

// Clone writes a copy of src's whole tree into dir (pi's forkFrom): every
// entry byte for byte, header cwd (if cwd != "") and parentSession = src's
// path.
func Clone(src *Session, dir, cwd string, opts Options) (*Session, error) {
	t := src.tree
	t.mu.RLock()
	nodes := append([]*node(nil), t.nodes...)
	if cwd == "" {
		cwd = t.header.Cwd
	}
	t.mu.RUnlock()
	return writeCopy(src, nodes, nil, dir, cwd, opts)
}

func writeCopy(src *Session, nodes []*node, extra []Entry, dir, cwd string, opts Options) (*Session, error) {
	now := opts.now()
	parent := src.path
	if abs, err := filepath.Abs(src.path); err == nil {
		if _, ok := src.storage.(FileStorage); ok {
			parent = abs
		}
	}
	h := Header{Type: TypeSession, Version: CurrentVersion, ID: NewSessionID(now), Timestamp: Timestamp(now), Cwd: cwd, ParentSession: parent}
	hb, _ := h.MarshalJSON()
	var buf bytes.Buffer
	buf.Write(hb)
	buf.WriteByte('\n')
	ids := map[string]bool{}
	last := ""
	br := src.tree.bodies()
	defer br.close()
	for _, n := range nodes {
		line := br.line(n)
		if line == nil {
			return nil, fmt.Errorf("session: fork: %w", br.err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
		ids[n.id] = true
		last = n.id
	}
	for _, e := range extra {
		e.ID = newEntryID(func(id string) bool { return ids[id] })
		ids[e.ID] = true
		e.ParentID = last
		if opts.Fence != 0 {
			e.Fence = opts.Fence
		}
		b, err := marshalNoEscape(e)
		if err != nil {
			return nil, fmt.Errorf("session: fork: %w", err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
		last = e.ID
	}
	path := filepath.Join(dir, FileName(h.Timestamp, h.ID))
	if err := src.storage.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("session: fork %s: %w", path, err)
	}
	if err := src.storage.WriteFile(path, buf.Bytes()); err != nil {
		return nil, fmt.Errorf("session: fork %s: %w", path, err)
	}
	return Open(src.storage, path, opts)
}
