package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"
)

// indexer indexes one part of the file, [from, to), which starts at a
// line: it streams the part through one buffer and records every line's
// envelope. A line longer than the buffer is parsed from its prefix and
// skipped to its end.
type indexer struct {
	x        *fastCtx
	from, to int64
	cur      int64 // the next offset to read
	buf      []byte
	header   bool // the header was seen (true for every part but the first)
	version  int
	lines    []envLine // fences not checked yet, entries of type session included
	arena    []byte    // kept lines (envLine.kept is 1 + the offset here)
	// missingNL: the last line has no newline; seen: the part has a line.
	missingNL, seen bool
	read            time.Duration
	bytes           int64
	// where the data after a long line starts, and whether it is the end
	after    int64
	afterEOF bool
}

// index builds x.lines from the first size bytes of the file: in parallel
// parts for a large file, merged in file order, where the fences are
// checked.
func (x *fastCtx) index(size int64) error {
	parts := 1
	if size >= x.sizes.parallel {
		parts = min(runtime.GOMAXPROCS(0), 4)
	}
	bounds := x.split(size, parts)
	ixs := make([]*indexer, len(bounds)-1)
	errs := make([]error, len(ixs))
	var wg sync.WaitGroup
	for i := range ixs {
		ix := &indexer{x: x, from: bounds[i], to: bounds[i+1], cur: bounds[i], header: i > 0,
			buf: make([]byte, x.sizes.buf), lines: make([]envLine, 0, (bounds[i+1]-bounds[i])/1024+16)}
		ixs[i] = ix
		if len(ixs) == 1 {
			errs[i] = ix.run()
		} else {
			wg.Go(func() { errs[i] = ix.run() })
		}
	}
	wg.Wait()
	total := 0
	for i, ix := range ixs {
		x.st.Read += ix.read
		x.st.Bytes += ix.bytes
		total += len(ix.lines)
		if errs[i] != nil {
			return errs[i]
		}
	}
	if !ixs[0].header {
		return notFast("no session header")
	}
	x.version = ixs[0].version
	x.lines = make([]envLine, 0, total)
	var fence int64 // the highest so far
	for _, ix := range ixs {
		if ix.seen {
			x.missingNL = ix.missingNL
		}
		shift := uint32(len(x.arena))
		if x.arena == nil {
			x.arena = ix.arena
		} else {
			x.arena = append(x.arena, ix.arena...)
		}
		for _, e := range ix.lines {
			if e.kept != 0 {
				e.kept += shift
			}
			if e.fence != 0 {
				if e.fence < fence {
					return notFast(fmt.Sprintf("entry at byte %d: stale fence", e.off))
				}
				fence = e.fence
			}
			if !e.session {
				x.lines = append(x.lines, e)
			}
		}
	}
	x.wins = []*window{{f: x.f, buf: ixs[0].buf}} // the buffer serves the next passes
	return nil
}

// split returns the bounds of parts parts of the first size bytes, each
// starting at a line.
func (x *fastCtx) split(size int64, parts int) []int64 {
	bounds := []int64{0}
	var buf [64 << 10]byte
	for p := 1; p < parts; p++ {
		at := max(size*int64(p)/int64(parts), bounds[len(bounds)-1])
		for at < size {
			n, err := x.f.ReadAt(buf[:min(int64(len(buf)), size-at)], at)
			if k := bytes.IndexByte(buf[:n], '\n'); k >= 0 {
				at += int64(k) + 1
				break
			}
			at += int64(n)
			if err != nil {
				at = size
			}
		}
		bounds = append(bounds, at)
	}
	return append(bounds, size)
}

// readMore reads the part's next bytes into p, timed.
func (ix *indexer) readMore(p []byte) (int, error) {
	if ix.cur >= ix.to {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), ix.to-ix.cur)]
	t := time.Now()
	n, err := ix.x.f.ReadAt(p, ix.cur)
	ix.read += time.Since(t)
	ix.cur += int64(n)
	ix.bytes += int64(n)
	if err == nil && ix.cur >= ix.to {
		err = io.EOF
	}
	if err != nil && err != io.EOF {
		return n, notFast(err.Error())
	}
	return n, err
}

func (ix *indexer) run() error {
	buf := ix.buf
	base := ix.from // file offset of buf[0]
	n, pos := 0, 0
	eof := false
	if ix.from == 0 {
		// White space before the header is not part of it (leadingSpace).
		m, err := ix.readMore(buf)
		switch {
		case err == io.EOF:
			eof = true
		case err != nil:
			return err
		}
		n, pos = m, leadingSpace(buf[:m])
		if pos == n && !eof {
			return notFast("the file starts with more white space than the read buffer holds")
		}
	}
	for {
		nl := bytes.IndexByte(buf[pos:n], '\n')
		if nl < 0 && !eof {
			if pos > 0 {
				copy(buf, buf[pos:n])
				n -= pos
				base += int64(pos)
				pos = 0
			}
			if n == len(buf) {
				skipped, err := ix.longLine(base, buf)
				if err != nil {
					return err
				}
				if skipped < 0 { // the prefix holds no message: read more of it
					buf = append(buf, make([]byte, len(buf))...)
					ix.buf = buf
					continue
				}
				// buf[:skipped] holds what follows the long line.
				base, n, pos, eof = ix.after, skipped, 0, ix.afterEOF
				continue
			}
			m, err := ix.readMore(buf[n:])
			n += m
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return err
			}
			continue
		}
		end := n
		if nl >= 0 {
			end = pos + nl
		}
		if end > pos {
			line := buf[pos:end]
			env, stop, err := ix.x.scan(line, !ix.header)
			if err != nil {
				return entryErr(base+int64(pos), err)
			}
			if err := ix.add(base+int64(pos), int64(len(line)), env, line, stop >= 0); err != nil {
				return err
			}
			if !env.blank {
				ix.missingNL, ix.seen = nl < 0, true
			}
		}
		if nl < 0 {
			return nil
		}
		pos = end + 1
	}
}

// keepMax is the longest line the index keeps a copy of.
const keepMax = 4 << 10

// restMax is how many bytes may follow the message of a line longer than
// the read buffer (pi and pibot write none; a line with more falls back).
const restMax = 1 << 20

// longLine handles a line that fills buf (which starts at file offset
// base): when its prefix reaches the message, it skips the message piece
// by piece, reads the members after it and records the entry, leaving
// what follows the line in buf and returning its length (ix.after and
// ix.afterEOF say where it is); -1 when the prefix does not reach the
// message (the caller reads more of the line into a larger buffer).
func (ix *indexer) longLine(base int64, buf []byte) (int, error) {
	if !ix.header {
		return -1, nil // the header is read whole
	}
	r, stop, err := scanPrefix(buf)
	if err != nil || stop < 0 {
		return -1, nil
	}
	// r points into buf, which the reads below overwrite.
	r = envRaw{typ: bytes.Clone(r.typ), id: bytes.Clone(r.id), parent: bytes.Clone(r.parent), fence: bytes.Clone(r.fence)}
	var sk looseSkip
	var rest []byte // the line after the message
	ended := false
	consume := func(p []byte) error {
		if !ended {
			k := sk.feed(p)
			if k < 0 {
				return nil
			}
			ended, p = true, p[k:]
		}
		if len(rest)+len(p) > restMax {
			return notFast(fmt.Sprintf("entry at byte %d: more than %d bytes after its message", base, restMax))
		}
		rest = append(rest, p...)
		return nil
	}
	if err := consume(buf[stop:]); err != nil {
		return 0, err
	}
	finish := func(length int64) error {
		if !ended {
			return entryErr(base, errors.New("the line does not end its message"))
		}
		if err := scanRest(rest, &r); err != nil {
			return entryErr(base, err)
		}
		return ix.add(base, length, ix.x.envelope(r), nil, true)
	}
	length := int64(len(buf))
	for {
		m, rerr := ix.readMore(buf)
		if k := bytes.IndexByte(buf[:m], '\n'); k >= 0 {
			if err := consume(buf[:k]); err != nil {
				return 0, err
			}
			length += int64(k)
			if err := finish(length); err != nil {
				return 0, err
			}
			ix.missingNL, ix.seen = false, true
			after := copy(buf, buf[k+1:m])
			ix.after, ix.afterEOF = base+length+1, rerr == io.EOF
			return after, nil
		}
		if err := consume(buf[:m]); err != nil {
			return 0, err
		}
		length += int64(m)
		if rerr == io.EOF {
			if err := finish(length); err != nil {
				return 0, err
			}
			ix.after, ix.afterEOF, ix.missingNL, ix.seen = base+length, true, true, true
			return 0, nil
		}
		if rerr != nil {
			return 0, rerr
		}
	}
}

// add records one scanned line; partial says its message was skipped
// over, not validated. line is the whole line when it is in the buffer.
func (ix *indexer) add(off, length int64, e envelope, line []byte, partial bool) error {
	switch {
	case e.blank:
		return nil
	case e.header:
		ix.header, ix.version = true, e.version
		if e.version < CurrentVersion {
			return notFast(fmt.Sprintf("version %d file: the full loader migrates it", e.version))
		}
		return nil
	}
	el := envLine{off: off, n: length, fence: e.fence, id: e.id, parent: e.parent,
		root: e.root, msg: e.msg, partial: partial, session: e.session}
	if !partial && !e.session && length <= keepMax && len(ix.arena) < 1<<31 {
		el.kept = uint32(len(ix.arena)) + 1
		ix.arena = append(ix.arena, line...)
	}
	ix.lines = append(ix.lines, el)
	return nil
}
