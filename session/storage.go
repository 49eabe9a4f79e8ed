package session

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pibot/pibot/internal/fsync"
)

// File is an open session file in append mode.
type File interface {
	// Write appends p with a single write; it keeps no reference to p
	// (the session reuses the buffer).
	Write(p []byte) (int, error)
	// Sync makes the written data durable (fdatasync).
	Sync() error
	// Size returns the current size of the file.
	Size() (int64, error)
	// Truncate cuts the file to size.
	Truncate(size int64) error
	Close() error
}

// FileInfo describes one stored file for listings.
type FileInfo struct {
	Path    string
	ModTime time.Time
}

// Storage is where session files live. The file implementation is
// FileStorage; MemStorage keeps everything in memory for tests.
type Storage interface {
	ReadFile(path string) ([]byte, error)
	// OpenAppend opens an existing file for appending.
	OpenAppend(path string) (File, error)
	// Create makes a new file at path holding data, durably (directory
	// entry included); an existing file is never replaced (an error
	// matching fs.ErrExist). The file is returned open for appending.
	Create(path string, data []byte) (File, error)
	// WriteFile atomically replaces path with data, durably.
	WriteFile(path string, data []byte) error
	MkdirAll(dir string) error
	// SyncDir makes a directory's entries durable.
	SyncDir(dir string) error
	// List returns the *.jsonl files directly inside dir.
	List(dir string) ([]FileInfo, error)
}

// FileStorage stores sessions in the local file system.
type FileStorage struct{}

// ReadFile reads a whole file.
func (FileStorage) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

// OpenAppend opens path with O_APPEND.
func (FileStorage) OpenAppend(path string) (File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Create writes data to a temporary file, fdatasyncs it and links it to
// path, which must not exist, then syncs the directory: path never exists
// without its data, so a crash cannot leave an empty session file behind
// (which Open refuses as not a session, and no later create may replace).
// A file system without hard links gets an exclusive create (O_EXCL) and
// one write instead, where readers can see the file empty for an instant.
func (s FileStorage) Create(path string, data []byte) (File, error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".new*")
	if err != nil {
		return nil, err
	}
	name := tmp.Name()
	defer os.Remove(name)
	_, err = tmp.Write(data)
	if err == nil {
		err = fsync.Data(tmp)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := os.Link(name, path); err != nil {
		if errors.Is(err, fs.ErrExist) || !linkUnsupported(err) {
			return nil, err
		}
		return s.createExclusive(path, data)
	}
	if err := s.SyncDir(dir); err != nil {
		return nil, err
	}
	return s.OpenAppend(path)
}

// createExclusive is Create without hard links.
func (s FileStorage) createExclusive(path string, data []byte) (File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(data)
	if err == nil {
		err = fsync.Data(f)
	}
	if err == nil {
		err = s.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return osFile{f}, nil
}

// WriteFile writes data to a temporary file, syncs it and renames it over path.
func (s FileStorage) WriteFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = fsync.Data(tmp)
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(name, path)
	}
	if werr != nil {
		_ = os.Remove(name)
		return werr
	}
	return s.SyncDir(filepath.Dir(path))
}

// MkdirAll creates dir and its parents.
func (FileStorage) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o700) }

// SyncDir fsyncs a directory.
func (FileStorage) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// List returns the *.jsonl files in dir.
func (FileStorage) List(dir string) ([]FileInfo, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []FileInfo
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, FileInfo{Path: filepath.Join(dir, e.Name()), ModTime: info.ModTime()})
	}
	return out, nil
}

type osFile struct{ f *os.File }

func (o osFile) Write(p []byte) (int, error) { return o.f.Write(p) }
func (o osFile) Sync() error                 { return fsync.Data(o.f) }
func (o osFile) Truncate(n int64) error      { return o.f.Truncate(n) }
func (o osFile) Close() error                { return o.f.Close() }
func (o osFile) Size() (int64, error)        { return fileSize(o.f) }

// MemStorage keeps files in memory. It is safe for concurrent use.
type MemStorage struct {
	mu    sync.Mutex
	files map[string]*memData
	dirs  map[string]bool
}

type memData struct {
	data []byte
	mod  time.Time
}

// NewMemStorage returns an empty in-memory storage.
func NewMemStorage() *MemStorage {
	return &MemStorage{files: map[string]*memData{}, dirs: map[string]bool{}}
}

// ReadFile returns a copy of the file's bytes.
func (m *MemStorage) ReadFile(path string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[filepath.Clean(path)]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return append([]byte(nil), f.data...), nil
}

// OpenAppend opens an existing in-memory file for appending.
func (m *MemStorage) OpenAppend(path string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	path = filepath.Clean(path)
	if _, ok := m.files[path]; !ok {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return &memFile{m: m, path: path}, nil
}

// Create makes a new in-memory file holding data.
func (m *MemStorage) Create(path string, data []byte) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	path = filepath.Clean(path)
	if _, ok := m.files[path]; ok {
		return nil, &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
	}
	if !m.dirs[filepath.Dir(path)] {
		return nil, &fs.PathError{Op: "create", Path: path, Err: fs.ErrNotExist}
	}
	m.files[path] = &memData{data: append([]byte(nil), data...), mod: time.Now()}
	return &memFile{m: m, path: path}, nil
}

// WriteFile replaces a file.
func (m *MemStorage) WriteFile(path string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	path = filepath.Clean(path)
	if !m.dirs[filepath.Dir(path)] {
		return &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	m.files[path] = &memData{data: append([]byte(nil), data...), mod: time.Now()}
	return nil
}

// MkdirAll records dir and its parents.
func (m *MemStorage) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		m.dirs[d] = true
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// SyncDir checks that dir exists.
func (m *MemStorage) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[filepath.Clean(dir)] {
		return &fs.PathError{Op: "sync", Path: dir, Err: fs.ErrNotExist}
	}
	return nil
}

// List returns the *.jsonl files directly in dir, sorted by name.
func (m *MemStorage) List(dir string) ([]FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	if !m.dirs[dir] {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	var out []FileInfo
	for p, f := range m.files {
		if filepath.Dir(p) == dir && strings.HasSuffix(p, ".jsonl") {
			out = append(out, FileInfo{Path: p, ModTime: f.mod})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

type memFile struct {
	m      *MemStorage
	path   string
	closed bool
}

var errClosed = errors.New("file already closed")

func (f *memFile) get() (*memData, error) {
	if f.closed {
		return nil, errClosed
	}
	d, ok := f.m.files[f.path]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return d, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	d, err := f.get()
	if err != nil {
		return 0, err
	}
	d.data = append(d.data, p...)
	d.mod = time.Now()
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	_, err := f.get()
	return err
}

func (f *memFile) Size() (int64, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	d, err := f.get()
	if err != nil {
		return 0, err
	}
	return int64(len(d.data)), nil
}

func (f *memFile) Truncate(n int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	d, err := f.get()
	if err != nil {
		return err
	}
	if n < int64(len(d.data)) {
		d.data = d.data[:n]
	}
	return nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.closed = true
	return nil
}

// RangeFile is a session file open for reading parts of it.
type RangeFile interface {
	io.ReaderAt
	// Size returns the current size of the file.
	Size() (int64, error)
	Close() error
}

// RangeStorage is a Storage that reads parts of a file. Open with
// Options.Lazy streams such a file once, keeps each entry's envelope and
// where its line is, and reads a message's line when it is needed.
type RangeStorage interface {
	Storage
	// OpenRange opens an existing file for reading parts of it.
	OpenRange(path string) (RangeFile, error)
}

// OpenRange opens path read-only.
func (FileStorage) OpenRange(path string) (RangeFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return rangeFile{f}, nil
}

type rangeFile struct{ f *os.File }

func (r rangeFile) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }
func (r rangeFile) Size() (int64, error)                    { return fileSize(r.f) }
func (r rangeFile) Close() error                            { return r.f.Close() }

// OpenRange opens an existing in-memory file for reading parts of it; it
// reads the file's bytes as they are at each read.
func (m *MemStorage) OpenRange(path string) (RangeFile, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	path = filepath.Clean(path)
	if _, ok := m.files[path]; !ok {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return memRange{m: m, path: path}, nil
}

type memRange struct {
	m    *MemStorage
	path string
}

func (r memRange) ReadAt(p []byte, off int64) (int, error) {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	f, ok := r.m.files[r.path]
	if !ok {
		return 0, &fs.PathError{Op: "read", Path: r.path, Err: fs.ErrNotExist}
	}
	if off >= int64(len(f.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (r memRange) Size() (int64, error) {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	f, ok := r.m.files[r.path]
	if !ok {
		return 0, &fs.PathError{Op: "stat", Path: r.path, Err: fs.ErrNotExist}
	}
	return int64(len(f.data)), nil
}

func (memRange) Close() error { return nil }

// linkUnsupported reports whether err, from os.Link, says the file system
// has no hard links (rather than that the link failed).
func linkUnsupported(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EMLINK)
}
