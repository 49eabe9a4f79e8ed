package session

import (
	"bufio"
	"bytes"
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
	// Read is the time spent in read system calls; Index splitting lines
	// and parsing envelopes (for the full loader: open and parse, reads
	// included); Validate checking and scanning the path's lines; Emit
	// building and writing the answer (writes included).
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
// the file once keeping each entry's envelope (offset, id, parent, fence;
// a message line's envelope is read from its prefix, up to "message", and
// its end checked for a trailing fence), walks back from the leaf to the
// root, scans every line of that path completely, and then copies the
// messages from the file to w. Anything it cannot answer exactly like the
// full loader (a legacy version, a line that is not valid where it looked,
// a stale fence, duplicate ids, a parent that is not an earlier entry,
// a damaged line on the path) makes it fall back to OpenFile before
// anything was written. The message bodies the answer does not hold (off
// the path, or before a compaction's kept range) are not validated: damage
// there goes unnoticed, where the full loader would skip the line and
// report it (pibot session repair --dry-run reads every line).
//
// The returned report is the full loader's, or a clean one when the fast
// path answered. st, if not nil, receives the statistics.
func WriteContext(w io.Writer, path, leafID string, st *ContextStats) (Report, error) {
	if st == nil {
		st = &ContextStats{}
	}
	*st = ContextStats{}
	rep, err := writeContextFast(w, path, leafID, st)
	var nf notFast
	if err == nil || !asNotFast(err, &nf) {
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
	st.Lines = s.Len()
	rep = s.Report()
	t1 := time.Now()
	c, err := s.Context(leafID)
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

func asNotFast(err error, nf *notFast) bool {
	v, ok := err.(notFast)
	if ok {
		*nf = v
	}
	return ok
}

// envLine is the envelope of one entry line.
type envLine struct {
	off, n     int64 // line offset and length (without the newline)
	fence      int64
	id, parent uint64 // hashes of the decoded id and parentId
	root       bool   // parentId null, absent, "" or not a string
	msg        bool   // a message entry
	partial    bool   // scanned up to its message only
}

// fastCtx is one fast WriteContext.
type fastCtx struct {
	f       *os.File
	st      *ContextStats
	seed    maphash.Seed
	lines   []envLine
	header  bool
	version int
	fence   int64 // highest fence so far
	// where the data after a long line starts, and whether it is the end
	after    int64
	afterEOF bool
	// the last line has no newline
	missingNL bool
	wins      []*window // see window
}

// entryErr makes a scan error of the line at off a reason to fall back.
func entryErr(off int64, err error) error {
	if _, ok := err.(notFast); ok {
		return err
	}
	return notFast(fmt.Sprintf("entry at byte %d: %v", off, err))
}

func writeContextFast(w io.Writer, path, leafID string, st *ContextStats) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, notFast(err.Error())
	}
	defer f.Close()
	x := &fastCtx{f: f, st: st, seed: maphash.MakeSeed()}
	if fi, err := f.Stat(); err == nil {
		x.lines = make([]envLine, 0, fi.Size()/1024+16)
	}
	t0 := time.Now()
	if err := x.index(); err != nil {
		return Report{}, err
	}
	path1, err := x.path(leafID)
	if err != nil {
		return Report{}, err
	}
	st.Index = time.Since(t0) - st.Read
	st.Lines, st.Path = len(x.lines), len(path1)
	t1, r0 := time.Now(), st.Read
	nodes, lines, err := x.validate(path1)
	if err != nil {
		return Report{}, err
	}
	st.Validate = time.Since(t1) - (st.Read - r0)
	t2 := time.Now()
	err = x.emit(w, nodes, lines)
	st.Emit = time.Since(t2)
	return Report{Path: path, FromVersion: x.version, MissingNewline: x.missingNL}, err
}

// read is f.Read, timed.
func (x *fastCtx) read(p []byte) (int, error) {
	t := time.Now()
	n, err := x.f.Read(p)
	x.st.Read += time.Since(t)
	x.st.Bytes += int64(n)
	return n, err
}

// index streams the file through one buffer and records every entry's
// envelope. A line longer than the buffer is parsed from its prefix and
// skipped to its end.
func (x *fastCtx) index() error {
	buf := make([]byte, 1<<20)
	var base int64 // file offset of buf[0]
	n, pos := 0, 0
	eof := false
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
				skipped, err := x.longLine(base, buf)
				if err != nil {
					return err
				}
				if skipped < 0 { // the prefix holds no message: read more of it
					buf = append(buf, make([]byte, len(buf))...)
					continue
				}
				// buf[:skipped] holds what follows the long line.
				base, n, pos, eof = x.after, skipped, 0, x.afterEOF
				continue
			}
			m, err := x.read(buf[n:])
			n += m
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return notFast(err.Error())
			}
			continue
		}
		end := n
		if nl >= 0 {
			end = pos + nl
		}
		if end > pos {
			line := buf[pos:end]
			env, stop, err := x.scan(line)
			if err != nil {
				return entryErr(base+int64(pos), err)
			}
			x.missingNL = nl < 0 && !env.blank
			tail := line
			if stop >= 0 {
				tail = line[stop:]
			}
			if err := x.add(base+int64(pos), int64(len(line)), env, tail, stop >= 0); err != nil {
				return err
			}
		}
		if nl < 0 {
			break
		}
		pos = end + 1
	}
	if !x.header {
		return notFast("no session header")
	}
	x.wins = []*window{{f: x.f, buf: buf}} // the buffer serves the next passes
	return nil
}

// tailKeep is how many bytes of a long line's end are kept for its checks.
const tailKeep = 64

// longLine handles a line that fills buf (which starts at file offset
// base): when its prefix reaches the message, it records the entry and
// reads on to the line's end, leaving what follows in buf and returning
// its length (x.after and x.afterEOF say where it is); -1 when the prefix
// does not reach the message.
func (x *fastCtx) longLine(base int64, buf []byte) (int, error) {
	env, stop, err := x.scan(buf)
	if err != nil || stop < 0 {
		return -1, nil
	}
	var tail [2 * tailKeep]byte
	t := copy(tail[:], buf[len(buf)-tailKeep:])
	length := int64(len(buf))
	for {
		m, rerr := x.read(buf)
		if k := bytes.IndexByte(buf[:m], '\n'); k >= 0 {
			t = keepTail(&tail, t, buf[:k])
			length += int64(k)
			if err := x.add(base, length, env, tail[:t], true); err != nil {
				return 0, err
			}
			rest := copy(buf, buf[k+1:m])
			x.after, x.afterEOF = base+length+1, rerr == io.EOF
			return rest, nil
		}
		t = keepTail(&tail, t, buf[:m])
		length += int64(m)
		if rerr == io.EOF {
			if err := x.add(base, length, env, tail[:t], true); err != nil {
				return 0, err
			}
			x.after, x.afterEOF, x.missingNL = base+length, true, true
			return 0, nil
		}
		if rerr != nil {
			return 0, notFast(rerr.Error())
		}
	}
}

// keepTail appends p to the t bytes kept in tail, keeping the last tailKeep.
func keepTail(tail *[2 * tailKeep]byte, t int, p []byte) int {
	if len(p) >= tailKeep {
		return copy(tail[:], p[len(p)-tailKeep:])
	}
	if t+len(p) > len(tail) {
		t = copy(tail[:], tail[t-tailKeep:t])
	}
	return t + copy(tail[t:], p)
}
