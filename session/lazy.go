package session

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sync/atomic"
)

// ErrFileChanged is matched (errors.Is) by the error of a read from a
// lazily loaded session (Options.Lazy) whose file no longer holds an
// entry's line where its index says: the file was rewritten or cut under
// it. Nothing is served from such a file; opening it again loads it anew.
var ErrFileChanged = errors.New("session file changed under its index")

// notLazy is why a lazy open gave up, before it changed anything: the
// full loader opens the file instead (it reports and repairs damage,
// migrates old versions).
type notLazy string

func (n notLazy) Error() string { return string(n) }

// castagnoli is the CRC table of the sums that check a line read again.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// lineSum is the checksum a lazily loaded node keeps of its line.
func lineSum(line []byte) uint32 { return crc32.Checksum(line, castagnoli) }

// lazyChunk is how much of a file a lazy load reads at a time.
const lazyChunk = 8 << 20

// lazyLoad is a streamed scan of a session file's lines: it keeps each
// entry's envelope and where its line is, and the lines of the entries
// that are not messages (they are decoded anyway).
type lazyLoad struct {
	header     Header
	headerSeen bool
	lineNo     int   // lines seen so far, blank ones included
	maxFence   int64 // the highest fence seen
	nodes      []*node
	first      int // index of nodes[0] among the tree's entries
	chunk      int // bytes read at a time (0: lazyChunk); tests make it small
}

// scan scans the lines of f in [from, to); from is the start of a line.
// A file the full loader would read differently (a damaged line, a stale
// fence, a last line without a newline) ends it with a notLazy error.
func (ld *lazyLoad) scan(f io.ReaderAt, from, to int64) error {
	return forChunks(f, from, to, ld.chunk, false, ld.lines)
}

// forChunks reads the bytes of f in [from, to) (from is the start of a
// line) in chunks of whole lines, lazyChunk bytes or so (size, if not 0),
// and calls fn with each and its file offset. A last line without a
// newline is passed alone at the end when partial is true, else it is a
// notLazy error.
func forChunks(f io.ReaderAt, from, to int64, size int, partial bool, fn func(chunk []byte, base int64) error) error {
	chunk := int64(lazyChunk)
	if size > 0 {
		chunk = int64(size)
	}
	buf := make([]byte, min(chunk, max(to-from, 1)))
	base, n := from, 0 // file offset of buf[0]; bytes in buf
	for {
		if end := base + int64(n); end < to && n < len(buf) {
			m, err := f.ReadAt(buf[n:n+int(min(int64(len(buf)-n), to-end))], end)
			n += m
			if m == 0 && err != nil {
				if err == io.EOF {
					return notLazy("the file shrank while it was read")
				}
				return err
			}
			continue
		}
		last := bytes.LastIndexByte(buf[:n], '\n')
		if last < 0 {
			switch {
			case n == 0:
				return nil
			case base+int64(n) >= to && partial:
				return fn(buf[:n], base)
			case base+int64(n) >= to:
				return notLazy("the last line has no newline")
			}
			buf = append(buf, make([]byte, len(buf))...) // a line longer than the buffer
			continue
		}
		if err := fn(buf[:last+1], base); err != nil {
			return err
		}
		n = copy(buf, buf[last+1:n])
		base += int64(last + 1)
	}
}

// lines scans the whole lines of chunk, which starts at file offset base.
func (ld *lazyLoad) lines(chunk []byte, base int64) error {
	ls := scanLinesFrom(chunk, ld.lineNo == 0)
	for li := range ls {
		l := &ls[li]
		ld.lineNo++
		if l.blank {
			continue
		}
		if l.err != nil {
			return notLazy(fmt.Sprintf("line %d: %v", ld.lineNo, l.err))
		}
		line := chunk[l.start:l.end]
		if !ld.headerSeen {
			h, err := decodeHeader(line)
			if err != nil {
				return notLazy(fmt.Sprintf("line %d: %v", ld.lineNo, err))
			}
			ld.header, ld.headerSeen = h, true
			continue
		}
		n := l.n
		if n.fence != 0 {
			if n.fence < ld.maxFence {
				return notLazy(fmt.Sprintf("line %d: stale fence", ld.lineNo))
			}
			ld.maxFence = n.fence
		}
		if n.typ == TypeSession {
			continue
		}
		if len(line) > math.MaxUint32 {
			return notLazy(fmt.Sprintf("line %d is longer than 4 GiB", ld.lineNo))
		}
		n.line, n.index = ld.lineNo, ld.first+len(ld.nodes)
		n.off, n.size, n.sum = base+int64(l.start), uint32(len(line)), lineSum(line)
		if n.typ == TypeMessage {
			n.raw = nil // read when needed
		} else {
			n.raw = bytes.Clone(line)
		}
		ld.nodes = append(ld.nodes, n)
	}
	return nil
}

// bodySource is where a lazily loaded Tree reads its lines.
type bodySource struct {
	storage RangeStorage
	path    string
	// changed: a read found the file changed under the index, which is
	// then never kept (Indexes).
	changed atomic.Bool
}

// bodyReader reads the lines of one operation on a Tree: a node's line
// when the Tree holds it, else from the file (opened at the first read,
// closed by close), checked against the node's sum. The first failure is
// kept in err; later reads return nothing.
type bodyReader struct {
	src *bodySource // nil: every line is held
	f   RangeFile
	err error
}

// bodies returns a reader of t's lines; the caller closes it.
func (t *Tree) bodies() bodyReader { return bodyReader{src: t.src} }

// line returns n's line (without its newline), or nil after a failure.
func (r *bodyReader) line(n *node) []byte {
	if n.raw != nil {
		return n.raw
	}
	if r.err != nil {
		return nil
	}
	if r.src == nil {
		r.err = fmt.Errorf("session: entry %s: no line", n.id)
		return nil
	}
	if r.f == nil {
		f, err := r.src.storage.OpenRange(r.src.path)
		if err != nil {
			r.err = fmt.Errorf("session: %s: open: %w", r.src.path, err)
			return nil
		}
		r.f = f
	}
	buf := make([]byte, int(n.size)+1)
	k, err := r.f.ReadAt(buf, n.off)
	switch {
	case k == len(buf) && buf[n.size] == '\n' && lineSum(buf[:n.size]) == n.sum:
		return buf[:n.size:n.size]
	case err != nil && err != io.EOF:
		r.err = fmt.Errorf("session: %s: read entry %s: %w", r.src.path, n.id, err)
	default:
		r.src.changed.Store(true)
		r.err = fmt.Errorf("session: %s: entry %s at byte %d: %w", r.src.path, n.id, n.off, ErrFileChanged)
	}
	return nil
}

// message returns the span of n's line holding its message.
func (r *bodyReader) message(n *node) []byte {
	l := r.line(n)
	if l == nil {
		return nil
	}
	return l[n.msg[0]:n.msg[1]]
}

// close closes the file if a read opened it.
func (r *bodyReader) close() {
	if r.f != nil {
		_ = r.f.Close()
		r.f = nil
	}
}
