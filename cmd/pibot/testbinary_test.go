package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// cachedBinary builds the test binary of pibot into dir (binaryDir) and
// returns its path, safely when several test processes of one checkout
// run at once (two `go test` of cmd/pibot, say): one builds at a time
// (an flock of dir/build.lock, held across processes), and the binary the
// tests run, dir/pibot, is replaced by a rename of a complete copy, so
// no process ever executes a half-written file while another writes it.
//
// build writes the binary to the path it is given: dir/pibot.build, kept
// between runs and written only under the lock, so that go build, which
// leaves a target whose build ID is current alone, links nothing on a
// warm cache.
func cachedBinary(dir string, build func(out string) error) (string, error) {
	unlock, err := lockFile(filepath.Join(dir, "build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	// A copy a killed process left half done is nobody's now.
	if stale, _ := filepath.Glob(filepath.Join(dir, ".pibot.tmp*")); len(stale) > 0 {
		for _, p := range stale {
			_ = os.Remove(p)
		}
	}
	staged, final := filepath.Join(dir, "pibot.build"), filepath.Join(dir, "pibot")
	if err := build(staged); err != nil {
		return "", err
	}
	if same, err := sameFile(staged, final); err != nil {
		return "", err
	} else if same {
		return final, nil
	}
	if err := replaceWithCopy(staged, final); err != nil {
		return "", fmt.Errorf("install the test binary: %w", err)
	}
	return final, nil
}

// lockFile waits for an exclusive flock of path (created if missing and
// left in place); unlock releases it. flock locks belong to the open
// file, so two callers in one process exclude each other as two
// processes do.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// sameFile reports whether the files at a and b hold the same bytes (b
// missing: false).
func sameFile(a, b string) (bool, error) {
	x, err := os.ReadFile(a)
	if err != nil {
		return false, err
	}
	y, err := os.ReadFile(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return string(x) == string(y), nil
}

// replaceWithCopy copies the executable from to a temporary file beside
// to and renames it over to: a process that starts to in the meantime
// runs the old binary or the new one, whole.
func replaceWithCopy(from, to string) (err error) {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	_, err = io.Copy(tmp, src)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), to)
}
