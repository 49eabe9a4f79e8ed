// Package atomicfile replaces a small file so that a crash leaves either
// the old or the new content, never a mix: write a temporary file, fsync
// it, rename it over the target, fsync the directory. Every write has a
// temporary file of its own, so processes sharing a directory (replicas
// on one data directory, pibot and its CLI) never rename each other's;
// Lock serializes a read-modify-write of one file across them.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Write replaces path with data (mode 0600). The temporary file is
// ".NAME.tmp" plus a random suffix, in path's directory.
func Write(path string, data []byte) error {
	_, err := replace(path, data, 0)
	return err
}

// WriteOpen replaces path with data as Write does and returns the new
// file opened with flag (os.O_APPEND|os.O_WRONLY, say). It is opened
// before the rename, so a failure leaves path as it was and the handle
// is never the old file's; its Name is the temporary one.
func WriteOpen(path string, data []byte, flag int) (*os.File, error) {
	return replace(path, data, flag)
}

// replace is Write, and WriteOpen when flag is not 0.
func replace(path string, data []byte, flag int) (*os.File, error) {
	t, err := Begin(path)
	if err != nil {
		return nil, err
	}
	if err := t.Write(data); err != nil {
		t.Discard()
		return nil, err
	}
	return t.Commit(flag)
}

// Temp is the new content of a file, written in steps: Begin creates its
// temporary file, Write and Sync add to it and make it durable, and
// Commit replaces the file with it as WriteOpen does. A caller that must
// hold writers off while the file is replaced writes and syncs the bulk
// of the content first, without its lock, and under it only adds what
// came meanwhile and commits: the disk then has little left to do there.
// A Temp is used by one goroutine; one that is not committed is
// discarded.
type Temp struct {
	f      *os.File
	path   string
	synced bool // a Sync made everything written so far durable
}

// Begin starts the new content of path: an empty temporary file
// (".NAME.tmp" plus a random suffix, mode 0600) in path's directory.
func Begin(path string) (*Temp, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, err
	}
	return &Temp{f: f, path: path}, nil
}

// Write appends b to the new content.
func (t *Temp) Write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	t.synced = false
	_, err := t.f.Write(b)
	return err
}

// Sync makes what was written so far durable.
func (t *Temp) Sync() error {
	if t.synced {
		return nil
	}
	if err := t.f.Sync(); err != nil {
		return err
	}
	t.synced = true
	return nil
}

// Commit syncs what was written since the last Sync, renames the
// temporary file over path and syncs the directory; with flag not 0 it
// returns the new file opened with flag (opened before the rename, so a
// failure leaves path as it was; its Name is the temporary one). On a
// failure before the rename the temporary file is removed.
func (t *Temp) Commit(flag int) (*os.File, error) {
	tmp := t.f.Name()
	err := t.Sync()
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	var opened *os.File
	if err == nil && flag != 0 {
		opened, err = os.OpenFile(tmp, flag, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, t.path)
	}
	if err != nil {
		if opened != nil {
			_ = opened.Close()
		}
		_ = os.Remove(tmp)
		return nil, err
	}
	if err := syncDir(filepath.Dir(t.path)); err != nil {
		if opened != nil {
			_ = opened.Close()
		}
		return nil, err
	}
	return opened, nil
}

// Discard removes the temporary file; path is left as it was.
func (t *Temp) Discard() {
	_ = t.f.Close()
	_ = os.Remove(t.f.Name())
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Lock waits for an exclusive lock on changing path, held by one process
// at a time: an flock of path+".lock" (created, mode 0600, and left in
// place). A caller that reads path, changes it and writes it back under
// the lock loses no other process's change. unlock releases it.
func Lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", filepath.Base(path), err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", filepath.Base(path), err)
	}
	// Closing the file releases the lock.
	return func() { f.Close() }, nil
}
