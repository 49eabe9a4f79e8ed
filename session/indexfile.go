package session

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
)

// A saved index (Indexes with a directory, NewSavedIndexes) is a cache
// file in pibot's data directory, never next to the session file: a
// header (indexMagic, indexVersion, the CRC-32C and length of the body)
// and a body holding the session file's path, its stamp (device and
// inode, the sums of the first and last stampWindow bytes the index
// covers), the covered length, the highest fence, the session header and
// the flatIndex's tables, records and arena. It is used only when all of
// it matches the file (and the first and last entries' lines still do);
// anything else makes it ignored, removed, and the file loaded anew.
const (
	indexMagic   = "pibotidx"
	indexVersion = 1
	indexHeader  = 24 // magic, version, CRC, body length
	flatEntryLen = 60 // a record's bytes in the file
	stampWindow  = 4096
)

// fileStamp is what a saved index says of the session file it indexes:
// its identity (device and inode, where the storage says) and the sums
// of the first and last bytes it covers.
type fileStamp struct {
	dev, ino   uint64
	hasID      bool
	head, tail uint32
}

// matches reports whether s and o stamp the same file: the same sums,
// and the same device and inode (or neither known).
func (s *fileStamp) matches(o *fileStamp) bool { return *s == *o }

// FileIdentifier is a RangeFile that knows which file it reads: its
// device and inode (ok false when it cannot tell). A saved index
// (NewSavedIndexes) is used only for the file it was saved of: one
// saved of a file read by a FileIdentifier, only when the file is read
// by one again and is the same file. FileStorage's files implement it.
type FileIdentifier interface {
	FileID() (dev, ino uint64, ok bool)
}

// stampOf stamps f, of which x indexes the first x.end bytes (size is
// its length), after checking that it still holds x's first and last
// entries' lines.
func stampOf(f RangeFile, src *bodySource, end, size int64, check []node) (*fileStamp, error) {
	if size < end {
		return nil, notLazy("the file is shorter than the index")
	}
	br := bodyReader{src: src, f: f}
	for i := range check {
		if br.line(&check[i]) == nil {
			return nil, br.err
		}
	}
	st := &fileStamp{}
	if fi, ok := f.(FileIdentifier); ok {
		st.dev, st.ino, st.hasID = fi.FileID()
	}
	var err error
	if st.head, err = sumAt(f, 0, min(end, stampWindow)); err != nil {
		return nil, err
	}
	if st.tail, err = sumAt(f, max(0, end-stampWindow), end); err != nil {
		return nil, err
	}
	return st, nil
}

// sumAt is the lineSum of f's bytes in [from, to).
func sumAt(f RangeFile, from, to int64) (uint32, error) {
	buf := make([]byte, to-from)
	if k, err := f.ReadAt(buf, from); k != len(buf) {
		if err == nil || err == io.EOF {
			err = notLazy("the file is shorter than the index")
		}
		return 0, err
	}
	return lineSum(buf), nil
}

// NewSavedIndexes is NewIndexes whose indexes are also saved in dir
// (pibot's data directory, never the sessions'), as a cache that outlives
// the process: the index of a closed session of at least minEntries
// entries is written there when it closes, and the first Open of its file
// with no index kept in memory reads it there, checks it against the
// file (which must still hold what it indexed) and reads only the lines
// appended since. A saved index that does not match is removed and the
// file loaded anew.
func NewSavedIndexes(dir string, minEntries, maxEntries int) *Indexes {
	x := NewIndexes(minEntries, maxEntries)
	x.dir = dir
	return x
}

// savedPath is where the index of path is saved.
func (x *Indexes) savedPath(path string) string {
	sum := sha256.Sum256([]byte(path))
	return filepath.Join(x.dir, hex.EncodeToString(sum[:16])+".idx")
}

// save writes d, the flat index of the closed session of path, to x's
// directory when it has one, d is large enough and what is saved there
// covers less of the file: crash-safely (a
// temporary file, fsynced, renamed, the directory fsynced).
func (x *Indexes) save(rs RangeStorage, path string, d *flatIndex) error {
	if x == nil || x.dir == "" || d.len() < x.min || d.savedEnd == d.end {
		return nil // nothing to save, or saved already
	}
	hj, _ := d.header.MarshalJSON()
	if h, err := decodeHeader(hj); err != nil || !reflect.DeepEqual(h, d.header) {
		return nil // a header its JSON would not give back: not saved
	}
	f, err := rs.OpenRange(path)
	if err != nil {
		return fmt.Errorf("session: save index of %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("session: save index of %s: %w", path, err)
	}
	st, err := stampOf(f, &bodySource{storage: rs, path: path}, d.end, size, d.checked())
	if err != nil {
		return fmt.Errorf("session: save index of %s: %w", path, err)
	}
	if err := os.MkdirAll(x.dir, 0o700); err != nil {
		return fmt.Errorf("session: save index of %s: %w", path, err)
	}
	if err := writeIndexFile(x.savedPath(path), func(w *indexWriter) { d.encode(w, path, st, hj) }); err != nil {
		return fmt.Errorf("session: save index of %s: %w", path, err)
	}
	d.savedEnd = d.end // d is not shared yet
	return nil
}

// loadSaved returns the index saved of path, when x has a directory
// and the index there matches the file f (size bytes long); nil
// otherwise, after removing a saved index that does not match.
func (x *Indexes) loadSaved(path string, f RangeFile, size int64) *keptIndex {
	if x == nil || x.dir == "" {
		return nil
	}
	at := x.savedPath(path)
	d, err := readIndexFile(at, path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		var st *fileStamp
		if st, err = stampOf(f, nil, d.end, size, nil); err == nil && !st.matches(d.stamp) {
			err = errors.New("the file is not what was indexed")
		}
	}
	if err != nil {
		_ = os.Remove(at)
		return nil
	}
	return &keptIndex{flat: d}
}

// writeIndexFile writes a saved index at path: body writes its body.
func writeIndexFile(path string, body func(w *indexWriter)) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(make([]byte, indexHeader)); err != nil {
		return err
	}
	crc := crc32.New(castagnoli)
	w := &indexWriter{w: bufio.NewWriterSize(io.MultiWriter(tmp, crc), 1<<20)}
	body(w)
	if err := w.w.Flush(); err != nil {
		return err
	}
	hdr := make([]byte, 0, indexHeader)
	hdr = append(hdr, indexMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, indexVersion)
	hdr = binary.LittleEndian.AppendUint32(hdr, crc.Sum32())
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(w.n))
	if _, err := tmp.WriteAt(hdr, 0); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return FileStorage{}.SyncDir(filepath.Dir(path))
}

// indexWriter writes the body of a saved index.
type indexWriter struct {
	w   *bufio.Writer
	n   int64
	buf [8]byte
}

func (w *indexWriter) write(b []byte) {
	k, _ := w.w.Write(b) // bufio keeps the first error; Flush returns it
	w.n += int64(k)
}

func (w *indexWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(w.buf[:4], v)
	w.write(w.buf[:4])
}

func (w *indexWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(w.buf[:8], v)
	w.write(w.buf[:8])
}

func (w *indexWriter) bytes(b []byte) {
	w.u64(uint64(len(b)))
	w.write(b)
}

func (w *indexWriter) str(s string) {
	w.u64(uint64(len(s)))
	k, _ := w.w.WriteString(s)
	w.n += int64(k)
}

// encode writes the body of d's saved index: path is the session file's,
// st its stamp, hj its header's JSON.
func (d *flatIndex) encode(w *indexWriter, path string, st *fileStamp, hj []byte) {
	w.str(path)
	w.u64(st.dev)
	w.u64(st.ino)
	w.u32(boolU32(st.hasID))
	w.u32(st.head)
	w.u32(st.tail)
	w.u64(uint64(d.end))
	w.u64(uint64(d.maxFence))
	w.bytes(hj)
	w.u64(uint64(len(d.kinds)))
	for _, k := range d.kinds {
		w.str(k.typ)
		w.str(k.role)
		w.str(k.provider)
		w.str(k.model)
	}
	w.u64(uint64(len(d.fences)))
	for _, f := range d.fences {
		w.u64(uint64(f))
	}
	w.u64(uint64(len(d.metas)))
	for _, m := range d.metas {
		w.u32(m.loc)
		w.u32(m.msg)
		w.u32(m.from)
	}
	w.u64(uint64(len(d.extras)))
	for _, e := range d.extras {
		w.bytes(e.raw)
	}
	w.str(d.arena)
	w.u64(uint64(len(d.ents)))
	var rec [flatEntryLen]byte
	for i := range d.ents {
		e := &d.ents[i]
		b := binary.LittleEndian.AppendUint64(rec[:0], uint64(e.off))
		for _, v := range [...]uint32{e.id, e.pid, e.ts, e.line, e.size, e.sum, e.msg0, e.msg1, e.kind, e.meta, e.fence, e.extra, uint32(e.parent)} {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		w.write(b)
	}
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
