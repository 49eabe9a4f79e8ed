package session

import (
	"bufio"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"time"
)

// ContextStats says how WriteContext answered and where its time went.
type ContextStats struct {
	// Fast is true when the envelope index answered; Fallback says why
	// the full loader answered instead ("" when Fast).
	Fast     bool
	Fallback string
	Bytes    int64 // bytes of the file indexed
	Lines    int   // entries indexed
	Path     int   // entries on the leaf's path
	Out      int64 // bytes written, newline included
	// Index is the time spent splitting lines, parsing envelopes and
	// finding the path (for the full loader: open and parse); Validate
	// scanning the path's lines; Emit building and writing the answer.
	// Each includes its reads; Read is the time spent in read calls,
	// summed over the goroutines that read in parallel.
	Read, Index, Validate, Emit time.Duration
}

// notFast is why the fast path gave up; nothing was written yet.
type notFast string

func (n notFast) Error() string { return string(n) }

// WriteContext writes the context of leafID ("" = pi's default leaf) of
// the session file at path to w as one line: the bytes of
// Context(leafID).MarshalJSON() after a read-only OpenFile, and a newline.
//
// It first tries a path that never holds the file in memory: it streams
// the file once keeping each entry's envelope (offset, id, parent, fence,
// from every top-level member, wherever it is: pi writes "id" and
// "parentId" after the message of an entry it migrated; the message
// itself is only skipped over, its brackets and strings followed, not
// validated), walks back from the leaf to the root, scans completely the
// lines of that path the answer depends on, and then copies the messages
// from the file to w. Anything it cannot answer exactly like the full
// loader (a legacy version, a line that is not valid where it looked, a
// stale fence, many duplicate ids, a parent that is not an earlier entry,
// a damaged line on the path) makes it fall back to OpenFile before
// anything was written. A message of the path the answer does not hold
// (before a compaction's kept range) is read only if dropping it, were it
// damaged, could change the answer: unless the entries before and after
// it in the file are its parent and its child and no other entry has its
// id. Damage the answer does not depend on (off the path, or such a
// message) goes unnoticed, where the full loader would skip the line and
// report it (pibot session repair --dry-run reads every line).
//
// The returned report is the full loader's, or a clean one when the fast
// path answered. st, if not nil, receives the statistics.
func WriteContext(w io.Writer, path, leafID string, st *ContextStats) (Report, error) {
	return writeContext(w, path, leafID, st, fastSizes{buf: windowSize, parallel: parallelMin})
}

// writeContext is WriteContext with the fast path's sizes.
func writeContext(w io.Writer, path, leafID string, st *ContextStats, sizes fastSizes) (Report, error) {
	if st == nil {
		st = &ContextStats{}
	}
	*st = ContextStats{}
	rep, err := writeContextFast(w, path, leafID, st, sizes)
	nf, ok := errors.AsType[notFast](err)
	if !ok {
		st.Fast = err == nil
		return rep, err
	}
	*st = ContextStats{Fallback: string(nf)}
	t0 := time.Now()
	s, err := OpenFile(path, Options{ReadOnly: true})
	if err != nil {
		return Report{}, err
	}
	defer s.Close()
	st.Index = time.Since(t0)
	st.Lines = s.Tree().Len()
	rep = s.Report()
	t1 := time.Now()
	c, err := s.Tree().Context(leafID)
	if err != nil {
		return rep, err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	n, err := c.WriteTo(bw)
	if err == nil {
		err = bw.WriteByte('\n')
	}
	if err == nil {
		err = bw.Flush()
	}
	st.Out, st.Emit = n+1, time.Since(t1)
	return rep, err
}

// envLine is the envelope of one entry line.
type envLine struct {
	off, n     int64 // line offset and length (without the newline)
	fence      int64
	id, parent uint64 // hashes of the decoded id and parentId
	root       bool   // parentId null, absent, "" or not a string
	msg        bool   // a message entry
	partial    bool   // its message was skipped over, not validated
	session    bool   // of type session: not an entry (dropped after the fence check)
	kept       uint32 // 1 + the line's offset in fastCtx.arena; 0: not kept
}

// fastCtx is one fast WriteContext.
type fastCtx struct {
	f       *os.File
	st      *ContextStats
	seed    maphash.Seed
	lines   []envLine
	version int
	// the last line has no newline
	missingNL bool
	wins      []*window // see window
	// dups holds the id hashes more than one line has (see duplicates)
	dups map[uint64]bool
	// arena holds copies of the short lines the index scanned whole (the
	// entries that are not messages), so the path's need no second read.
	arena []byte
	sizes fastSizes
}

// fastSizes are the sizes the fast path works with; tests make them small
// to reach long lines and parallel parts with small files.
type fastSizes struct {
	buf      int   // the index's read buffer (a longer line is a long line)
	parallel int64 // the file and path sizes read in parallel parts
}

// entryErr makes a scan error of the line at off a reason to fall back.
func entryErr(off int64, err error) error {
	if _, ok := err.(notFast); ok {
		return err
	}
	return notFast(fmt.Sprintf("entry at byte %d: %v", off, err))
}

func writeContextFast(w io.Writer, path, leafID string, st *ContextStats, sizes fastSizes) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, notFast(err.Error())
	}
	defer f.Close()
	x := &fastCtx{f: f, st: st, seed: maphash.MakeSeed(), sizes: sizes}
	fi, err := f.Stat()
	if err != nil {
		return Report{}, notFast(err.Error())
	}
	t0 := time.Now()
	if err := x.index(fi.Size()); err != nil {
		return Report{}, err
	}
	path1, err := x.path(leafID)
	if err != nil {
		return Report{}, err
	}
	st.Index = time.Since(t0)
	st.Lines, st.Path = len(x.lines), len(path1)
	t1 := time.Now()
	nodes, lines, err := x.validate(path1)
	if err != nil {
		return Report{}, err
	}
	st.Validate = time.Since(t1)
	t2 := time.Now()
	err = x.emit(w, nodes, lines)
	st.Emit = time.Since(t2)
	return Report{Path: path, FromVersion: x.version, MissingNewline: x.missingNL}, err
}
