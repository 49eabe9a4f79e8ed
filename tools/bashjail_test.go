package tools

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/tools/jail"
	"github.com/pibot/pibot/tools/sandbox"
)

// containedJail skips the test unless calls run in a cgroup or PID
// namespace with a binding process cap on this host.
func containedJail(t *testing.T) {
	t.Helper()
	j, err := jail.New(jail.Config{Limits: testLimits})
	if err != nil {
		t.Fatal(err)
	}
	if !j.Contained() || !j.ProcessesCapped() {
		t.Skipf("no containment on this host (needs root or a delegated cgroup): %s", j.Status())
	}
	t.Logf("jail: %s", j.Status())
}

// canSpawn checks that this process can still start threads and
// processes.
func canSpawn(t *testing.T) {
	t.Helper()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			runtime.LockOSThread() // a fresh OS thread per goroutine
			time.Sleep(10 * time.Millisecond)
		})
	}
	wg.Wait()
	if out, err := exec.Command("sh", "-c", "echo alive").Output(); err != nil || string(out) != "alive\n" {
		t.Fatalf("cannot start a process after the call: %q %v", out, err)
	}
}

// TestBashForkBomb replays issue #10: a fork bomb through the bash tool
// ends with the call, hits the process cap instead of the host's and
// leaves this process able to start threads and processes.
func TestBashForkBomb(t *testing.T) {
	containedJail(t)
	s, marker := bashSet(t)
	got, isErr, _ := call(t, s, "bash", `{"command":":(){ :|:& sleep 30; };:","timeout":10}`)
	if !isErr || !strings.Contains(got, "Command timed out after 10 seconds. The process limit of 256 (agent.limits.processes) was reached") {
		t.Errorf("got %q", trim(got))
	}
	assertNoStrays(t, marker)
	canSpawn(t)
}

// TestBashSetsidEscape replays issue #10: processes that leave the
// process group (setsid, nohup, double fork) die with the call.
func TestBashSetsidEscape(t *testing.T) {
	containedJail(t)
	s, marker := bashSet(t)
	got, isErr, _ := call(t, s, "bash", `{"command":"setsid sleep 1000 & nohup setsid sh -c 'sleep 1000 &' >/dev/null 2>&1 & (setsid sleep 1000 &) ; sleep 0.2; echo started"}`)
	if isErr || got != "started\n" {
		t.Errorf("got (%v) %q", isErr, got)
	}
	assertNoStrays(t, marker)
}

// TestBashMemoryLimit: a command over the memory limit gets a clear tool
// error; this process is unaffected.
func TestBashMemoryLimit(t *testing.T) {
	l := testLimits
	l.Memory = 64 << 20
	s, marker := bashSetWith(t, l, 0)
	got, isErr, _ := call(t, s, "bash", `{"command":"x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo ${#x}"}`)
	if !isErr {
		t.Errorf("got success: %q", trim(got))
	}
	if !strings.Contains(got, "memory limit of 64 MiB (agent.limits.memory)") && !strings.Contains(got, "cannot allocate") {
		t.Errorf("got %q", trim(got))
	}
	assertNoStrays(t, marker)
	canSpawn(t)
}

// TestBashFileSizeLimit: writing a file over the limit is stopped with a
// clear tool error.
func TestBashFileSizeLimit(t *testing.T) {
	l := testLimits
	l.FileSize = 1 << 20
	s, _ := bashSetWith(t, l, 0)
	got, isErr, _ := call(t, s, "bash", `{"command":"head -c 3000000 /dev/zero > big"}`)
	if !isErr || !strings.Contains(got, "Command exited with code 153. The file size limit of 1 MiB (agent.limits.file_size) was reached") {
		t.Errorf("got (%v) %q", isErr, trim(got))
	}
	st, err := os.Stat(filepath.Join(s.Workspace().Root(), "big"))
	if err != nil || st.Size() > 1<<20 {
		t.Errorf("big: %v, %v", st, err)
	}
}

// TestBashJailBeforeCode checks the limits are in force when the
// command's first instruction runs, and which capabilities it has.
func TestBashJailBeforeCode(t *testing.T) {
	s, _ := bashSet(t)
	got, isErr, _ := call(t, s, "bash", `{"command":"ulimit -f; ulimit -t; grep -E '^(NoNewPrivs|CapBnd)' /proc/self/status"}`)
	if isErr {
		t.Fatalf("got error %q", got)
	}
	if !strings.HasPrefix(got, "1048576\n600\n") || !strings.Contains(got, "NoNewPrivs:\t1\n") {
		t.Errorf("got %q, want file size 1048576 KiB, CPU 600 s, no_new_privs", got)
	}
	if os.Geteuid() == 0 && !strings.Contains(got, "CapBnd:\t00000000a00424fb") {
		t.Errorf("bounding set (want chown, dac_override, fowner, fsetid, kill, setgid, setuid, net_bind_service, net_raw, sys_chroot, audit_write, setfcap): %q", got)
	}
}

func fullPath(t *testing.T, details string) string {
	t.Helper()
	var d BashDetails
	if err := json.Unmarshal([]byte(details), &d); err != nil || d.FullOutputPath == "" {
		t.Fatalf("details %q: %v", details, err)
	}
	return d.FullOutputPath
}

// TestBashFullOutputPrivate: the full output of a truncated call is in a
// private directory, capped, and removed with the directory.
func TestBashFullOutputPrivate(t *testing.T) {
	s, _ := bashSetWith(t, testLimits, 1<<20)
	_, _, det := call(t, s, "bash", `{"command":"seq 1 1000000"}`)
	path := fullPath(t, det)
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("dir %s: %v %v", dir, st.Mode(), err)
	}
	fst, err := os.Stat(path)
	if err != nil || fst.Mode().Perm() != 0o600 {
		t.Fatalf("file %s: %v %v", path, fst.Mode(), err)
	}
	b, _ := os.ReadFile(path)
	if len(b) > 1<<20+200 || !strings.HasPrefix(string(b), "1\n2\n3\n") || !strings.Contains(string(b), "[pibot: full output cut at 1.0MB (agent.limits.output)]") {
		t.Errorf("full output of %d bytes ends %q", len(b), b[max(0, len(b)-100):])
	}
	// Files older than the TTL go when the next one is made.
	old := time.Now().Add(-outputTTL - time.Minute)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	_, _, det = call(t, s, "bash", `{"command":"seq 1 3000"}`)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("expired output still there: %v", err)
	}
	if filepath.Dir(fullPath(t, det)) != dir {
		t.Errorf("second output in another dir")
	}
	if err := RemoveOutputDir(filepath.Dir(dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir left: %v", err)
	}
}

// TestBashJailWithSandbox: the launcher composes with bubblewrap
// (launcher, then bwrap, then the shell).
func TestBashJailWithSandbox(t *testing.T) {
	j, err := jail.New(jail.Config{Limits: testLimits})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(t.Context(), Options{Workspace: t.TempDir(), TempDir: t.TempDir(), Jail: j, Sandbox: sandbox.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.SandboxStatus(), "sandbox on") {
		t.Skipf("bubblewrap unusable here: %s", s.SandboxStatus())
	}
	got, isErr, _ := call(t, s, "bash", `{"command":"echo hi; ulimit -f; grep NoNewPrivs /proc/self/status"}`)
	if isErr || got != "hi\n1048576\nNoNewPrivs:\t1\n" {
		t.Errorf("got (%v) %q", isErr, got)
	}
}

// TestProcessNote: a call that hit its process limit is told which one:
// agent.limits.processes, or the smaller budget pibot's cgroup leaves the
// tools (issue #29), which the key cannot raise.
func TestProcessNote(t *testing.T) {
	budget := jail.Budget{Host: 300, Reserve: 75, Tools: 210}
	tests := []struct {
		name       string
		configured int
		ev         jail.Events
		want       string
	}{
		{"the key", 1024, jail.Events{Processes: 1024},
			"The process limit of 1024 (agent.limits.processes) was reached: starting more processes or threads failed."},
		{"the key, under a larger budget", 64, jail.Events{Processes: 64, Budget: budget},
			"The process limit of 64 (agent.limits.processes) was reached: starting more processes or threads failed."},
		{"the budget", 1024, jail.Events{Processes: 210, Budget: budget},
			"The process limit of 210 was reached: starting more processes or threads failed. It is what pibot's cgroup, which may hold 300 tasks, leaves all tool calls together, 75 kept free for pibot; agent.limits.processes is 1024."},
		{"the budget, no key", 0, jail.Events{Processes: 210, Budget: budget},
			"The process limit of 210 was reached: starting more processes or threads failed. It is what pibot's cgroup, which may hold 300 tasks, leaves all tool calls together, 75 kept free for pibot."},
	}
	for _, tt := range tests {
		if got := processNote(tt.configured, tt.ev); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}
