package session

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
)

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
