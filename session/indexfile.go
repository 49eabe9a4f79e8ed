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
	"math"
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

// errIndexFile is why a saved index was not used.
var errIndexFile = errors.New("saved index damaged")

// indexReader reads the body of a saved index, whose length it knows:
// every count it reads is checked against the bytes left, so a damaged
// file never makes it allocate more than the file holds.
type indexReader struct {
	r    *bufio.Reader
	left int64
	err  error
	buf  [flatEntryLen]byte
}

// read reads n bytes, at most a record's, into the reader's buffer.
func (r *indexReader) read(n int) []byte {
	if r.err != nil || int64(n) > r.left {
		r.fail()
		return nil
	}
	b := r.buf[:n] // valid until the next read
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.fail()
		return nil
	}
	r.left -= int64(n)
	return b
}

func (r *indexReader) fail() {
	if r.err == nil {
		r.err = errIndexFile
	}
}

func (r *indexReader) u32() uint32 {
	if b := r.read(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *indexReader) u64() uint64 {
	if b := r.read(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// count reads a count of items of at least size bytes each.
func (r *indexReader) count(size int64) int {
	n := r.u64()
	if r.err == nil && n > uint64(r.left/size) {
		r.fail()
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// bytes reads a length and as many bytes, in a slice of their own.
func (r *indexReader) bytes() []byte {
	n := r.count(1)
	if n == 0 || r.err != nil {
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.fail()
		return nil
	}
	r.left -= int64(n)
	return b
}

func (r *indexReader) str() string { return string(r.bytes()) }

// readIndexFile reads the index saved at at for the session file path.
func readIndexFile(at, path string) (*flatIndex, error) {
	f, err := os.Open(at)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	hdr := make([]byte, indexHeader)
	if _, err := io.ReadFull(f, hdr); err != nil || string(hdr[:8]) != indexMagic {
		return nil, errIndexFile
	}
	if binary.LittleEndian.Uint32(hdr[8:]) != indexVersion {
		return nil, fmt.Errorf("%w: version %d", errIndexFile, binary.LittleEndian.Uint32(hdr[8:]))
	}
	sum, length := binary.LittleEndian.Uint32(hdr[12:]), binary.LittleEndian.Uint64(hdr[16:])
	if length != uint64(fi.Size()-indexHeader) {
		return nil, fmt.Errorf("%w: torn", errIndexFile)
	}
	crc := crc32.New(castagnoli)
	r := &indexReader{r: bufio.NewReaderSize(io.TeeReader(f, crc), 1<<20), left: int64(length)}
	d, err := decodeFlat(r, path)
	if err != nil {
		return nil, err
	}
	if crc.Sum32() != sum {
		return nil, fmt.Errorf("%w: checksum", errIndexFile)
	}
	return d, nil
}

// decodeFlat reads the body of a saved index of path, to its end.
func decodeFlat(r *indexReader, path string) (*flatIndex, error) {
	if r.str() != path {
		return nil, fmt.Errorf("%w: another file's", errIndexFile)
	}
	st := &fileStamp{dev: r.u64(), ino: r.u64(), hasID: r.u32() == 1, head: r.u32(), tail: r.u32()}
	d := &flatIndex{stamp: st, end: int64(r.u64()), maxFence: int64(r.u64())}
	d.savedEnd = d.end
	h, err := decodeHeader(r.bytes())
	if err != nil || r.err != nil {
		return nil, errIndexFile
	}
	d.header = h
	d.kinds = make([]flatKind, r.count(32))
	for i := range d.kinds {
		d.kinds[i] = flatKind{typ: internType([]byte(r.str())), role: r.str(), provider: r.str(), model: r.str()}
	}
	d.fences = make([]int64, r.count(8))
	for i := range d.fences {
		d.fences[i] = int64(r.u64())
	}
	d.metas = make([]flatMeta, r.count(12))
	for i := range d.metas {
		d.metas[i] = flatMeta{loc: r.u32(), msg: r.u32(), from: r.u32()}
	}
	d.extras = make([]flatExtra, r.count(8))
	for i := range d.extras {
		d.extras[i].raw = r.bytes()
	}
	d.arena = r.str()
	d.ents = make([]flatEntry, r.count(flatEntryLen))
	for i := range d.ents {
		b := r.read(flatEntryLen)
		if b == nil {
			break
		}
		var v [13]uint32
		for k := range v {
			v[k] = binary.LittleEndian.Uint32(b[8+4*k:])
		}
		d.ents[i] = flatEntry{off: int64(binary.LittleEndian.Uint64(b)), id: v[0], pid: v[1], ts: v[2], line: v[3], size: v[4], sum: v[5],
			msg0: v[6], msg1: v[7], kind: v[8], meta: v[9], fence: v[10], extra: v[11], parent: int32(v[12])}
	}
	if r.err != nil || r.left != 0 {
		return nil, errIndexFile
	}
	if _, err := r.r.ReadByte(); err != io.EOF {
		return nil, errIndexFile
	}
	if !d.valid() {
		return nil, fmt.Errorf("%w: a record out of range", errIndexFile)
	}
	return d, nil
}

// valid reports whether every ref and index of d's records is in range,
// so that building its tree cannot fail: a saved index is checked by
// its CRC, and by this against a bug or a hand-made file.
func (d *flatIndex) valid() bool {
	str := func(ref uint32) bool {
		if ref == 0 {
			return true
		}
		n, at := uvarintAt(d.arena, int(ref))
		return at > 0 && n <= uint64(len(d.arena)-at)
	}
	if len(d.arena) == 0 || d.arena[0] != 0 || len(d.metas) == 0 || len(d.fences) == 0 || len(d.extras) == 0 || d.end < 0 {
		return false
	}
	for _, m := range d.metas {
		if !str(m.loc) || !str(m.msg) || !str(m.from) {
			return false
		}
	}
	for i := range d.ents {
		e := &d.ents[i]
		if !str(e.id) || !str(e.pid) || !str(e.ts) || e.kind >= uint32(len(d.kinds)) || e.meta >= uint32(len(d.metas)) ||
			e.fence >= uint32(len(d.fences)) || e.extra >= uint32(len(d.extras)) ||
			e.parent < -1 || int64(e.parent) >= int64(len(d.ents)) || int(e.parent) == i ||
			e.msg0 > e.msg1 || e.msg1 > e.size || e.off < 0 || e.off > math.MaxInt64-int64(e.size) || e.off+int64(e.size) >= d.end ||
			(d.kinds[e.kind].typ == TypeMessage) != (e.extra == 0) ||
			(e.extra != 0 && len(d.extras[e.extra].raw) != int(e.size)) {
			return false
		}
	}
	return true
}
