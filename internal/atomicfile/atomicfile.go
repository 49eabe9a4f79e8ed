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
	_, err := replace(path, data, 0, nil)
	return err
}

// WriteOpen replaces path with data as Write does and returns the new
// file opened with flag (os.O_APPEND|os.O_WRONLY, say). It is opened
// before the rename, so a failure leaves path as it was and the handle
// is never the old file's; its Name is the temporary one.
func WriteOpen(path string, data []byte, flag int) (*os.File, error) {
	return replace(path, data, flag, nil)
}

// Step is a moment of a replacement, which WriteOpenSteps, and a Temp
// that BeginSteps made, report as they pass it (a test build's crash
// points: the inbox's compaction).
type Step int

const (
	// StepPartial: the temporary file holds a first part of the new
	// content (a Temp's first Write; WriteOpenSteps writes the first half
	// of its data there, nothing when there is none), not fsynced; path
	// is untouched.
	StepPartial Step = iota
	// StepWritten: the temporary file is whole and fsynced, not renamed.
	StepWritten
	// StepRenamed: the temporary file is renamed over path; the directory
	// is not fsynced yet.
	StepRenamed
	// StepSynced: the directory is fsynced: the replacement is durable.
	StepSynced
)

// WriteOpenSteps is WriteOpen, calling step at each Step it passes, in
// order (the steps after a failure are not reached).
func WriteOpenSteps(path string, data []byte, flag int, step func(Step)) (*os.File, error) {
	return replace(path, data, flag, step)
}

// TempPattern is the glob of the temporary files of path's replacements
// (Write, WriteOpen, Begin): those a crashed process left behind, which
// the one owner of path may remove when nothing else writes path.
func TempPattern(path string) string {
	return filepath.Join(filepath.Dir(path), tempName(path))
}

// tempName is os.CreateTemp's pattern of path's temporary files.
func tempName(path string) string { return "." + filepath.Base(path) + ".tmp*" }

// replace is Write, and WriteOpen when flag is not 0; step (nil: none)
// is told each Step passed.
func replace(path string, data []byte, flag int, step func(Step)) (*os.File, error) {
	t, err := BeginSteps(path, step)
	if err != nil {
		return nil, err
	}
	half := len(data) // written in one piece unless a step is told
	if step != nil {
		half /= 2
	}
	for _, part := range [][]byte{data[:half], data[half:]} {
		if err := t.Write(part); err != nil {
			t.Discard()
			return nil, err
		}
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
	// step, if not nil, is told each Step passed; written says a Write
	// told StepPartial.
	step    func(Step)
	written bool
}

// Begin starts the new content of path: an empty temporary file
// (".NAME.tmp" plus a random suffix, mode 0600) in path's directory.
func Begin(path string) (*Temp, error) { return BeginSteps(path, nil) }

// BeginSteps is Begin, the Temp calling step at each Step it passes, in
// order: StepPartial after its first Write (even of nothing), the others
// in Commit (the steps after a failure are not reached).
func BeginSteps(path string, step func(Step)) (*Temp, error) {
	f, err := os.CreateTemp(filepath.Dir(path), tempName(path))
	if err != nil {
		return nil, err
	}
	return &Temp{f: f, path: path, step: step}, nil
}

// tell tells t's step, if any, that s is passed.
func (t *Temp) tell(s Step) {
	if t.step != nil {
		t.step(s)
	}
}

// Write appends b to the new content.
func (t *Temp) Write(b []byte) error {
	if len(b) > 0 {
		t.synced = false
		if _, err := t.f.Write(b); err != nil {
			return err
		}
	}
	if !t.written {
		t.written = true
		t.tell(StepPartial)
	}
	return nil
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
	if err == nil {
		t.tell(StepWritten)
	}
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
	t.tell(StepRenamed)
	if err := syncDir(filepath.Dir(t.path)); err != nil {
		if opened != nil {
			_ = opened.Close()
		}
		return nil, err
	}
	t.tell(StepSynced)
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
