package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// outputTTL is how long a full-output file is kept.
const outputTTL = 24 * time.Hour

// outputDirPrefix names the private directory of one pibot process.
const outputDirPrefix = "pibot-bash-"

// OutputDir returns the private directory (mode 0700) under parent that
// holds this process's full outputs of truncated bash calls. pibot removes
// it when it stops; a later pibot removes those of dead processes.
func OutputDir(parent string) string {
	return filepath.Join(parent, outputDirPrefix+strconv.Itoa(os.Getpid()))
}

// RemoveOutputDir removes this process's full-output directory under
// parent.
func RemoveOutputDir(parent string) error {
	return os.RemoveAll(OutputDir(parent))
}

// outputDir creates full-output files in the process's private directory,
// created on first use. Files older than outputTTL are removed whenever a
// new one is created.
type outputDir struct {
	parent string
	mu     sync.Mutex
	ready  bool
}

// create opens a new full-output file (mode 0600).
func (d *outputDir) create() (*os.File, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dir := OutputDir(d.parent)
	if !d.ready {
		if err := privateDir(dir); err != nil {
			return nil, "", err
		}
		sweepOutputDirs(d.parent)
		d.ready = true
	}
	expire(dir, time.Now().Add(-outputTTL))
	var id [8]byte
	rand.Read(id[:])
	path := filepath.Join(dir, "pi-bash-"+hex.EncodeToString(id[:])+".log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, "", err
	}
	return f, path, nil
}

// privateDir creates dir with mode 0700, or accepts an existing one only
// if it is a real directory of this user with mode 0700 (another user
// may have planted it in a shared /tmp).
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || st.Mode().Perm() != 0o700 || !ok || int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is not a private directory of this user", dir)
	}
	return nil
}

// expire removes the files in dir last written before cutoff.
func expire(dir string, cutoff time.Time) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(dir, e.Name())) //nolint:errcheck // best effort
		}
	}
}

// sweepOutputDirs removes the directories of pibot processes that are
// gone (a crash skips the removal at exit).
func sweepOutputDirs(parent string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), outputDirPrefix))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), outputDirPrefix) || err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			dir := filepath.Join(parent, e.Name())
			if privateDir(dir) == nil {
				os.RemoveAll(dir) //nolint:errcheck // best effort
			}
		}
	}
}
