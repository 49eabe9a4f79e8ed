package session

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// CustomLease is the customType of the marker a new lease holder writes
// when it takes a file over (a lease fence above every fence in the file).
// Its data is LeaseMarker.
const CustomLease = "pibot.lease"

// LeaseMarker is the data of a CustomLease entry.
type LeaseMarker struct {
	Fence  int64  `json:"fence"`
	Holder string `json:"holder"`           // the replica that took over: host/pid
	Prev   int64  `json:"prevFence"`        // the highest fence before it (0: none)
	At     string `json:"at"`               // RFC 3339
	Reason string `json:"reason,omitempty"` // why, for a reader of the file
}

// HighestFence returns the highest fence of the entries in the file at
// path: 0 when no entry carries one or the file does not exist. A lease
// for the file is granted above it (cluster mode: a lease store that lost
// its counter must not hand out a fence the file's readers would ignore).
// Only top-level "fence" members count; a torn or bad line is skipped.
func HighestFence(storage Storage, path string) (int64, error) {
	if rs, ok := storage.(RangeStorage); ok {
		return streamFence(rs, path)
	}
	data, err := storage.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("session: read fence of %s: %w", path, err)
	}
	var highest int64
	for _, l := range scanLines(data) {
		if l.blank || l.err != nil || l.n == nil {
			continue
		}
		highest = max(highest, l.n.fence)
	}
	return highest, nil
}

// streamFence is HighestFence read in chunks, the file never whole in
// memory.
func streamFence(rs RangeStorage, path string) (int64, error) {
	f, err := rs.OpenRange(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("session: read fence of %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, fmt.Errorf("session: read fence of %s: %w", path, err)
	}
	highest, err := highestFenceIn(f, 0, size)
	if err != nil {
		return 0, fmt.Errorf("session: read fence of %s: %w", path, err)
	}
	return highest, nil
}

// highestFenceIn is the highest fence of the lines of f in [from, to); from is
// the start of a line (0: the file's).
func highestFenceIn(f io.ReaderAt, from, to int64) (int64, error) {
	var highest int64
	err := forChunks(f, from, to, 0, true, func(chunk []byte, base int64) error {
		for _, l := range scanLinesFrom(chunk, base == 0) {
			if l.blank || l.err != nil || l.n == nil {
				continue
			}
			highest = max(highest, l.n.fence)
		}
		return nil
	})
	if _, ok := errors.AsType[notLazy](err); ok {
		err = nil // shrank while read: the lines read are what there is
	}
	return highest, err
}

// HighestFence is session.HighestFence answered from the index kept of
// path, when there is one and the file still holds what it indexed: only
// the lines appended since are read. Else it loads the file's lazy index
// and keeps it for the Open that follows (loadFence). A nil *Indexes, or
// a storage that is no RangeStorage, reads as session.HighestFence.
func (x *Indexes) HighestFence(storage Storage, path string) (int64, error) {
	rs, ok := storage.(RangeStorage)
	if !ok || x == nil {
		return HighestFence(storage, path)
	}
	x.mu.Lock()
	k := x.kept[path]
	var end, fence int64
	var check []node
	if k != nil {
		end, check = k.covered()
		fence = k.maxFence()
	}
	x.mu.Unlock()
	if k == nil {
		return x.loadFence(rs, path)
	}
	f, err := rs.OpenRange(path)
	if err != nil {
		return HighestFence(storage, path)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return HighestFence(storage, path)
	}
	br := bodyReader{src: &bodySource{storage: rs, path: path}, f: f}
	for i := -1; i < len(check); i++ {
		if size < end || (i >= 0 && br.line(&check[i]) == nil) {
			// The file changed under the kept index: load it anew.
			x.drop(path, k)
			return x.loadFence(rs, path)
		}
	}
	tail, err := highestFenceIn(f, end, size)
	if err != nil {
		return 0, fmt.Errorf("session: read fence of %s: %w", path, err)
	}
	return max(fence, tail), nil
}

// loadFence answers HighestFence by loading the file's lazy index, which
// it keeps for the Open that follows (the lease is taken between the
// two): the file is read once, not twice. A file the full loader must
// open is read by HighestFence.
func (x *Indexes) loadFence(rs RangeStorage, path string) (int64, error) {
	f, err := rs.OpenRange(path)
	if err != nil {
		return HighestFence(rs, path)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return HighestFence(rs, path)
	}
	var t *Tree
	if k := x.loadSaved(path, f, size); k != nil {
		t, _, _ = k.reopen(&bodySource{storage: rs, path: path}, f, size)
	}
	if t == nil {
		if t, err = loadIndex(rs, path, f, size); t == nil || err != nil {
			return HighestFence(rs, path)
		}
	}
	x.keep(path, &keptIndex{tree: t}, false)
	return t.maxFence, nil
}
