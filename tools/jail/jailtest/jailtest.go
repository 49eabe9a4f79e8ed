//go:build linux

// Package jailtest gives a test a pids cgroup of its own with a small
// budget, to run pibot (or a helper process) in as a service manager or a
// container runtime would (systemd's TasksMax, docker --pids-limit).
package jailtest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cgroup is a pids cgroup created for one test.
type Cgroup struct {
	// Dir is its directory.
	Dir string
	v2  bool
}

// fs is where cgroups are mounted.
const fs = "/sys/fs/cgroup"

// PidsCgroup creates a pids cgroup that allows max tasks and removes it
// when the test ends, killing whatever still runs in it. It is created
// where pibot's jail looks: in the unified hierarchy (below its root) when
// that is mounted at /sys/fs/cgroup, else in the v1 pids hierarchy below
// the test's own cgroup. The test is skipped, saying why, where no pids
// cgroup can be created (not root, no pids controller).
func PidsCgroup(t testing.TB, max int) *Cgroup {
	t.Helper()
	parent, v2, err := parentDir()
	if err != nil {
		t.Skipf("no pids cgroup can be created here: %v", err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	c := &Cgroup{Dir: filepath.Join(parent, "pibot-test-"+hex.EncodeToString(rnd[:])), v2: v2}
	if err := os.Mkdir(c.Dir, 0o755); err != nil {
		t.Skipf("no pids cgroup can be created here (needs root and a writable pids hierarchy): %v", err)
	}
	t.Cleanup(func() {
		if err := c.remove(); err != nil {
			t.Errorf("jailtest: remove %s: %v", c.Dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(c.Dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		t.Skipf("cannot limit a cgroup's pids here: %v", err)
	}
	return c
}

// parentDir is where PidsCgroup creates its cgroup, and whether that is
// in the unified hierarchy.
func parentDir() (dir string, v2 bool, err error) {
	if _, err := os.Stat(filepath.Join(fs, "cgroup.controllers")); err == nil {
		ctl, _ := os.ReadFile(filepath.Join(fs, "cgroup.subtree_control"))
		if !slices.Contains(strings.Fields(string(ctl)), "pids") {
			if err := os.WriteFile(filepath.Join(fs, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
				return "", false, err
			}
		}
		return fs, true, nil
	}
	own, err := ownPids()
	if err != nil {
		return "", false, err
	}
	return filepath.Join(fs, "pids", own), false, nil
}

// ownPids returns this process's cgroup in the v1 pids hierarchy.
func ownPids() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "pids") {
			return parts[2], nil
		}
	}
	return "", errors.New("no pids controller in /proc/self/cgroup")
}

// Command returns a command that runs argv in the cgroup from its first
// instruction, as user uid:gid when uid is not -1 (the cgroup is then
// delegated to them, as systemd's Delegate=yes does for a service's
// user, so that a jail of theirs may create cgroups below it). In the
// unified hierarchy the process is created in the cgroup (clone3's
// CLONE_INTO_CGROUP); in v1 a shell writes its pid into cgroup.procs
// and executes argv in its place, keeping the pid.
func (c *Cgroup) Command(t testing.TB, uid, gid int, argv ...string) *exec.Cmd {
	t.Helper()
	attr := &syscall.SysProcAttr{}
	if uid != -1 {
		if err := c.delegate(uid, gid); err != nil {
			t.Fatalf("jailtest: delegate %s: %v", c.Dir, err)
		}
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	var cmd *exec.Cmd
	if c.v2 {
		d, err := os.Open(c.Dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		attr.UseCgroupFD, attr.CgroupFD = true, int(d.Fd())
		cmd = exec.Command(argv[0], argv[1:]...)
	} else {
		cmd = exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, c.Dir}, argv...)...)
	}
	cmd.SysProcAttr = attr
	return cmd
}

// delegate gives the cgroup's directory and files to uid and gid.
func (c *Cgroup) delegate(uid, gid int) error {
	return filepath.Walk(c.Dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// Current is the number of tasks in the cgroup and below.
func (c *Cgroup) Current() int {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "pids.current"))
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// remove kills every process in the cgroup and the cgroups below it, and
// removes them, deepest first.
func (c *Cgroup) remove() error {
	var dirs []string
	_ = filepath.WalkDir(c.Dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	slices.Reverse(dirs)
	var errs []error
	for _, d := range dirs {
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, p := range strings.Fields(string(b)) {
				if pid, perr := strconv.Atoi(p); perr == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
