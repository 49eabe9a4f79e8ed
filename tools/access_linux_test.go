package tools

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/tools/sandbox"
	"golang.org/x/sys/unix"
)

// q quotes a path for a tool's JSON arguments.
func q(p string) string { b, _ := json.Marshal(p); return string(b) }

// TestFileToolsNeverReachKernelState replays issue 30.4 without a
// sandbox: unconfined file tools read pibot's /proc/self/environ, another
// process's environ, /etc/shadow, and followed workspace symlinks to
// them. Every file tool refuses /proc, /sys and /dev and the host's
// credentials, directly, through a symlink (plain, through
// /proc/self/root and /proc/self/cwd) and when walking a parent, with a
// message that says why.
func TestFileToolsNeverReachKernelState(t *testing.T) {
	s, dir := newSet(t, false, map[string]string{"notes.txt": "notes"})
	for link, target := range map[string]string{
		"env": "/proc/self/environ", "init": "/proc/1/environ", "shadow": "/etc/shadow", "root-shadow": "/proc/self/root/etc/shadow",
		"cwd": "/proc/self/cwd", "proc": "/proc", "sys": "/sys/kernel", "mem": "/dev/mem",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	kernel := "in /proc, /sys or /dev (process and kernel state)"
	secret := "holds the host's credentials"
	for p, want := range map[string]string{
		"/proc/self/environ": kernel, "/proc/1/environ": kernel, "/proc/self/root/etc/shadow": kernel, "/sys/kernel/notes": kernel,
		"/dev/mem": kernel, "/dev/null": kernel, "env": kernel, "init": kernel, "proc/self/environ": kernel, "sys": kernel, "mem": kernel,
		"root-shadow": kernel, "/etc/shadow": secret, "shadow": secret, "/etc/gshadow": secret,
	} {
		for tool, args := range map[string]string{
			"read":  `{"path":` + q(p) + `}`,
			"write": `{"path":` + q(p) + `,"content":"x"}`,
			"edit":  `{"path":` + q(p) + `,"edits":[{"oldText":"a","newText":"b"}]}`,
			"ls":    `{"path":` + q(p) + `}`,
			"grep":  `{"pattern":"PATH","path":` + q(p) + `}`,
			"find":  `{"pattern":"*","path":` + q(p) + `}`,
		} {
			if _, err := os.Lstat(p); err != nil && filepath.IsAbs(p) && tool != "write" {
				continue // not on this host
			}
			got, isErr, _ := call(t, s, tool, args)
			if !isErr || !strings.Contains(got, want) {
				t.Errorf("%s %s: isErr=%v %q, want %q", tool, p, isErr, got, want)
			}
		}
	}
	// Through /proc/self/cwd the link leads to pibot's working directory,
	// a plain directory: the lexical /proc is refused all the same.
	if got, isErr, _ := call(t, s, "ls", `{"path":"cwd"}`); !isErr || !strings.Contains(got, kernel) {
		t.Errorf("ls cwd: %q", got)
	}
	// Walking the workspace skips the links into /proc and /sys.
	got, _, _ := call(t, s, "grep", `{"pattern":"PATH=|Linux"}`)
	if got != "No matches found" {
		t.Errorf("grep over the workspace: %q", got)
	}
	// Listing / leaves out what the tools may not reach.
	got, _, _ = call(t, s, "ls", `{"path":"/"}`)
	for _, l := range strings.Split(got, "\n") {
		if l == "proc/" || l == "sys/" || l == "dev/" {
			t.Errorf("ls / lists %s", l)
		}
	}
	if got, isErr, _ := call(t, s, "read", `{"path":"notes.txt"}`); isErr || got != "notes" {
		t.Errorf("read notes.txt: %q", got)
	}
}

// TestFileToolsRefuseProcMountedElsewhere: a proc file system mounted
// inside the workspace (only root can do that) is refused by what the
// opened file is, not by its path: grep finds nothing in it, read
// refuses its files.
func TestFileToolsRefuseProcMountedElsewhere(t *testing.T) {
	s, dir := newSet(t, false, nil)
	mnt := filepath.Join(dir, "p")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("mount", "-t", "proc", "proc", mnt).Run(); err != nil {
		t.Skipf("cannot mount proc here (needs root): %v", err)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() }) //nolint:errcheck // best effort
	if got, isErr, _ := call(t, s, "read", `{"path":"p/self/environ"}`); !isErr || !strings.Contains(got, "process and kernel state") {
		t.Errorf("read p/self/environ: %q", got)
	}
	if got, _, _ := call(t, s, "grep", `{"pattern":"PATH="}`); got != "No matches found" {
		t.Errorf("grep: %.300q", got)
	}
	if got, _, _ := call(t, s, "find", `{"pattern":"environ"}`); got != "No files found matching pattern" {
		t.Errorf("find: %.300q", got)
	}
}

// TestFileToolsRefuseDevicesAndPipes: a FIFO in the workspace is neither
// read (which would hang) nor written.
func TestFileToolsRefuseDevicesAndPipes(t *testing.T) {
	s, dir := newSet(t, false, nil)
	if err := exec.Command("mkfifo", filepath.Join(dir, "fifo")).Run(); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for tool, args := range map[string]string{
		"read":  `{"path":"fifo"}`,
		"write": `{"path":"fifo","content":"x"}`,
		"edit":  `{"path":"fifo","edits":[{"oldText":"a","newText":"b"}]}`,
	} {
		got, isErr, _ := call(t, s, tool, args)
		if !isErr || !strings.Contains(got, "not a regular file or directory") {
			t.Errorf("%s fifo: %q", tool, got)
		}
	}
}

// TestBindConfinesNonOwners: with NonOwnersWorkspaceOnly, a call that
// serves an owner reaches outside the workspace and one that does not
// stays inside; the answer is taken at each call.
func TestBindConfinesNonOwners(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "o.txt"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(t.Context(), Options{Workspace: dir, NonOwnersWorkspaceOnly: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var owner atomic.Bool
	b := s.Bind(owner.Load, nil)
	args := `{"path":` + q(filepath.Join(outside, "o.txt")) + `}`
	for _, tt := range []struct {
		set   *Set
		owner bool
		want  string
	}{
		{s, true, "(agent.workspace_only: non_owners confines requests of users who are not owners)"}, // unbound: no owner
		{b, false, "outside the workspace"},
		{b, true, "outside"},
		{b, false, "is outside the workspace"},
	} {
		owner.Store(tt.owner)
		got, isErr, _ := call(t, tt.set, "read", args)
		if tt.want == "outside" {
			if isErr || got != "outside" {
				t.Errorf("owner read: %q", got)
			}
			continue
		}
		if !isErr || !strings.Contains(got, tt.want) {
			t.Errorf("owner=%v: %q, want %q", tt.owner, got, tt.want)
		}
	}
}

// TestConfinedResolvesBeneathTheWorkspace: a confined call works through
// the workspace's os.Root: "..", absolute symlinks and symlinks that
// leave the workspace are refused with a clear message, relative
// symlinks inside it are followed.
func TestConfinedResolvesBeneathTheWorkspace(t *testing.T) {
	s, dir := newSet(t, true, map[string]string{"a/in.txt": "inside"})
	for link, target := range map[string]string{"rel": "a/in.txt", "abs": filepath.Join(dir, "a/in.txt"), "up": "../" + filepath.Base(dir) + "/a/in.txt"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if got, isErr, _ := call(t, s, "read", `{"path":"rel"}`); isErr || got != "inside" {
		t.Errorf("read rel: %q", got)
	}
	for _, p := range []string{"abs", "up"} {
		got, isErr, _ := call(t, s, "read", `{"path":`+q(p)+`}`)
		if !isErr || !strings.Contains(got, "leads outside the workspace") {
			t.Errorf("read %s: %q", p, got)
		}
	}
	if got, isErr, _ := call(t, s, "write", `{"path":"a/b/c/new.txt","content":"x"}`); isErr {
		t.Errorf("write new: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a/b/c/new.txt")); string(b) != "x" {
		t.Errorf("new.txt = %q", b)
	}
}

// TestConfinedSymlinkSwapRace replays the check-then-open race: while a
// confined read and write run again and again, another goroutine keeps
// swapping a workspace path between a file and a symlink to a file
// outside (for the write, a directory and a symlink to a directory
// outside). No read ever returns the outside file, no write lands
// outside.
func TestConfinedSymlinkSwapRace(t *testing.T) {
	s, dir := newSet(t, true, nil)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("OUTSIDE-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	// f and d swap places with a symlink to outside, atomically and as
	// fast as the kernel allows (renameat2 RENAME_EXCHANGE).
	for _, l := range [][2]string{{"f", ""}, {".f", secret}, {"d", ""}, {".d", outside}} {
		p := filepath.Join(dir, l[0])
		var err error
		switch {
		case l[1] != "":
			err = os.Symlink(l[1], p)
		case l[0] == "f":
			err = os.WriteFile(p, []byte("inside"), 0o644)
		default:
			err = os.Mkdir(p, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, n := range []string{"f", "d"} {
				if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, n), unix.AT_FDCWD, filepath.Join(dir, "."+n), unix.RENAME_EXCHANGE); err != nil {
					t.Errorf("exchange: %v", err)
					return
				}
			}
		}
	})
	deadline := time.Now().Add(2 * time.Second)
	reads, writes := 0, 0
	for time.Now().Before(deadline) {
		got, isErr, _ := call(t, s, "read", `{"path":"f"}`)
		if strings.Contains(got, "OUTSIDE") {
			t.Fatalf("a confined read returned the outside file: %q", got)
		}
		if !isErr {
			reads++
		}
		if _, isErr, _ := call(t, s, "write", `{"path":"d/w.txt","content":"x"}`); !isErr {
			writes++
		}
	}
	close(stop)
	wg.Wait()
	if _, err := os.Stat(filepath.Join(outside, "w.txt")); err == nil {
		t.Error("a confined write landed outside the workspace")
	}
	if reads == 0 || writes == 0 {
		t.Errorf("the race never let a call through (%d reads, %d writes): the test proves nothing", reads, writes)
	}
}

// TestFileToolsSeeWhatBashSees is the conformance of the file tools with
// the real sandbox: for each path, an unconfined read succeeds exactly
// when `cat` in sandboxed bash shows the host's file, and a write
// succeeds exactly when the sandbox mounts it writable.
func TestFileToolsSeeWhatBashSees(t *testing.T) {
	if _, err := sandbox.New(t.Context(), sandbox.ModeBwrap, nil); err != nil {
		t.Skipf("no working bubblewrap: %v", err)
	}
	host, err := os.MkdirTemp("/var/tmp", "pibot-tools-test-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(host) })
	ws := filepath.Join(host, "ws")
	for p, c := range map[string]string{"ws/in.txt": "inside", "ws/denied.txt": "DENIED", "other.txt": "other"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(host, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(host, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hostTmp := filepath.Join(t.TempDir(), "tmp.txt")
	if err := os.WriteFile(hostTmp, []byte("tmp"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(t.Context(), Options{Workspace: ws, Sandbox: sandbox.ModeBwrap, DenyPaths: []string{filepath.Join(ws, "denied.txt")}, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(ws, "in.txt"), filepath.Join(ws, "denied.txt"), filepath.Join(host, "other.txt"), hostTmp,
		"/etc/hostname", "/etc/passwd", "/etc/shadow", "/usr/bin/env", "/root/.bashrc", "/var/log/dpkg.log", "/proc/self/status"} {
		host, err := os.ReadFile(p)
		if err != nil || len(host) == 0 {
			continue
		}
		out, isErr, _ := call(t, s, "bash", `{"command":"cat `+p+` 2>/dev/null"}`)
		bashSees := !isErr && out == string(host)
		got, isErr, _ := call(t, s, "read", `{"path":`+q(p)+`}`)
		toolSees := !isErr && got == string(host)
		if bashSees != toolSees {
			t.Errorf("%s: bash sees it: %v; read: %v (%.200q)", p, bashSees, toolSees, got)
		}
	}
	for _, tt := range []struct {
		path  string
		write bool
	}{{filepath.Join(ws, "new.txt"), true}, {filepath.Join(host, "new.txt"), false}, {"/etc/pibot-test-new", false}, {"/usr/pibot-test-new", false}} {
		got, isErr, _ := call(t, s, "write", `{"path":`+q(tt.path)+`,"content":"x"}`)
		if isErr == tt.write {
			t.Errorf("write %s: %q", tt.path, got)
		}
		if !tt.write {
			if _, err := os.Stat(tt.path); err == nil {
				os.Remove(tt.path)
				t.Errorf("write %s created the file", tt.path)
			}
		}
	}
	if got, _, _ := call(t, s, "write", `{"path":"/etc/x","content":"x"}`); !strings.Contains(got, "read-only") {
		t.Errorf("write /etc/x: %q", got)
	}
	if got, _, _ := call(t, s, "read", `{"path":`+q(hostTmp)+`}`); !strings.Contains(got, "empty one for each command") {
		t.Errorf("read in /tmp: %q", got)
	}
	if got, _, _ := call(t, s, "read", `{"path":"/root/x"}`); !strings.Contains(got, "not visible to the tools") {
		t.Errorf("read /root/x: %q", got)
	}
}
