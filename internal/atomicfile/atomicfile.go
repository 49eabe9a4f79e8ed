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

// Step is a moment of a replacement, which WriteOpenSteps reports as it
// passes it (a test build's crash points: the inbox's compaction).
type Step int

const (
	// StepPartial: the temporary file holds the first half of the data
	// (nothing, when there is none), not fsynced; path is untouched.
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
// (Write, WriteOpen): those a crashed process left behind, which the one
// owner of path may remove when nothing else writes path.
func TempPattern(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
}

// replace is Write, and WriteOpen when flag is not 0; step (nil: none)
// is told each Step passed.
func replace(path string, data []byte, flag int, step func(Step)) (*os.File, error) {
	half := len(data) // written in one piece unless a step is told
	if step == nil {
		step = func(Step) {}
	} else {
		half /= 2
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	_, err = f.Write(data[:half])
	if err == nil {
		step(StepPartial) // told even when the half is nothing
	}
	if err == nil && half < len(data) {
		_, err = f.Write(data[half:])
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		step(StepWritten)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var opened *os.File
	if err == nil && flag != 0 {
		opened, err = os.OpenFile(tmp, flag, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		if opened != nil {
			_ = opened.Close()
		}
		_ = os.Remove(tmp)
		return nil, err
	}
	step(StepRenamed)
	if err := syncDir(filepath.Dir(path)); err != nil {
		if opened != nil {
			_ = opened.Close()
		}
		return nil, err
	}
	step(StepSynced)
	return opened, nil
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
