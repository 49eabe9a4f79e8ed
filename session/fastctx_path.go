package session

import (
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"slices"
	"time"
)

// path returns the indexes (into x.lines) from the root to the leaf.
func (x *fastCtx) path(leafID string) ([]int, error) {
	if len(x.lines) == 0 {
		if leafID == "" {
			return nil, nil
		}
		return nil, notFast("no entries")
	}
	dups := x.duplicates()
	x.dups = dups
	if len(dups) > maxDups {
		// Each is looked up from the end: the full loader's map is cheaper.
		return nil, notFast(fmt.Sprintf("%d duplicate entry ids", len(dups)))
	}
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

// maxDups is how many duplicated ids the fast path resolves.
const maxDups = 64

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

// cleanBefore scans every entry line before x.lines[k] completely, as the
// loader does (the index checked a line it read whole is JSON, not that it
// is an entry the loader keeps: see entryDamage), and falls back if one is
// damaged.
func (x *fastCtx) cleanBefore(k int) error {
	win := x.window(0)
	defer func() { x.st.Read, win.read = x.st.Read+win.read, 0 }()
	for i := range k {
		e := &x.lines[i]
		var line []byte
		if e.kept != 0 {
			line = x.arena[e.kept-1 : int64(e.kept-1)+e.n]
		} else {
			var err error
			if line, err = win.at(e.off, e.n, windowSize); err != nil {
				return notFast(err.Error())
			}
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
