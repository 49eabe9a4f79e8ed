//go:build linux

package jail

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// run runs script through j and returns its combined output.
func run(t *testing.T, j *Jail, script string) (string, Events, error) {
	t.Helper()
	c, err := j.Command([]string{"/bin/sh", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	c.Env = []string{"PATH=/usr/bin:/bin"}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	err = c.Wait()
	ev := c.Close()
	return out.String(), ev, err
}

func TestLimitsAndCleanup(t *testing.T) {
	j, err := New(Config{Limits: Limits{Processes: 50, Memory: 256 << 20, CPUTime: 90 * time.Second, FileSize: 5 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, j, "ulimit -f; ulimit -t; cat /proc/self/cgroup")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.HasPrefix(out, "10240\n90\n") {
		t.Errorf("limits: %q", out)
	}
	if j.cg == nil {
		t.Skipf("no cgroups here: %s", j.Status())
	}
	if !strings.Contains(out, toolsDir+"/p"+strconv.Itoa(os.Getpid())+"-") {
		t.Errorf("not in a call cgroup: %q", out)
	}
	ents, _ := os.ReadDir(j.cg.pidsDir)
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "p"+strconv.Itoa(os.Getpid())+"-") {
			t.Errorf("cgroup %s left behind", e.Name())
		}
	}
}

// TestStaleCgroupsSwept: a call cgroup left by a dead pibot (kill -9) is
// emptied and removed by the next jail.
func TestStaleCgroupsSwept(t *testing.T) {
	j, err := New(Config{Limits: Limits{Processes: 50}})
	if err != nil {
		t.Fatal(err)
	}
	if j.cg == nil {
		t.Skipf("no cgroups here: %s", j.Status())
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale, err := j.cg.create("p"+strconv.Itoa(dead.Process.Pid)+"-1", 50)
	if err != nil {
		t.Fatal(err)
	}
	orphan := exec.Command("sleep", "1000")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	for _, d := range stale.dirs() {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(orphan.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(Config{Limits: Limits{Processes: 50}}); err != nil {
		t.Fatal(err)
	}
	if err := orphan.Wait(); err == nil {
		t.Error("the stale cgroup's process was not killed")
	}
	for _, d := range stale.dirs() {
		if exists(d) {
			t.Errorf("stale cgroup %s left", d)
		}
	}
}

// TestRootCannotReadNonDumpable replays issue #10 against the jail: a
// command run as root cannot read the environment or memory of a
// non-dumpable process of the same user (nor of a root process with more
// capabilities), which a plain root process can.
func TestRootCannotReadNonDumpable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: as another user the kernel's ptrace checks already refuse")
	}
	victim := exec.Command("sleep", "1000")
	victim.Env = []string{"VICTIM_SECRET=sk-victim-123"}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); victim.Wait() }() //nolint:errcheck // cleanup
	pid := strconv.Itoa(victim.Process.Pid)
	// sleep is dumpable; make it non-dumpable the way pibot makes itself:
	// a process can only do that to itself, so use a pibot-like helper.
	helper := exec.Command("/proc/self/exe", "-test.run=^TestNonDumpableHelper$")
	helper.Env = []string{"JAIL_HELPER=1", "HELPER_SECRET=sk-helper-456"}
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { helper.Process.Kill(); helper.Wait() }() //nolint:errcheck // cleanup
	buf := make([]byte, 64)
	n, _ := stdout.Read(buf) // "ready\n" once non-dumpable
	if !strings.HasPrefix(string(buf[:n]), "ready") {
		t.Fatalf("helper: %q", buf[:n])
	}
	hpid := strconv.Itoa(helper.Process.Pid)
	script := "cat /proc/" + hpid + "/environ; head -c 64 /proc/" + hpid + "/mem; cat /proc/" + pid + "/environ"
	// Control: a plain root process reads both.
	plain, _ := exec.Command("/bin/sh", "-c", script).CombinedOutput()
	if !strings.Contains(string(plain), "sk-helper-456") {
		t.Fatalf("control: root outside the jail should read the helper: %q", plain)
	}
	j, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	out, _, _ := run(t, j, script)
	if strings.Contains(out, "sk-helper-456") {
		t.Errorf("the jailed command read the non-dumpable helper's environment: %q", out)
	}
	// Without CAP_SYS_PTRACE, root cannot even read a dumpable root
	// process with more capabilities than its own.
	if strings.Contains(out, "sk-victim-123") {
		t.Errorf("the jailed command read a full-capability root process: %q", out)
	}
}

// TestNonDumpableHelper is the helper process of
// TestRootCannotReadNonDumpable.
func TestNonDumpableHelper(t *testing.T) {
	if os.Getenv("JAIL_HELPER") != "1" {
		t.Skip("helper process only")
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("ready\n") //nolint:errcheck // the parent reads it
	time.Sleep(time.Minute)
}

func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	j, err := New(Config{User: fmt.Sprintf("%d:%d", runAsUID, runAsUID), Limits: Limits{Processes: 20}, NoCgroup: true})
	if err != nil {
		t.Fatal(err)
	}
	limit := strconv.Itoa(userTasks(runAsUID) + 20)
	id := strconv.Itoa(runAsUID)
	out, _, err := run(t, j, "id -u; id -g; grep 'Max processes' /proc/self/limits | tr -s ' '; grep CapEff /proc/self/status")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out != id+"\n"+id+"\nMax processes "+limit+" "+limit+" processes \nCapEff:\t0000000000000000\n" {
		t.Errorf("got %q", out)
	}
	// The cap binds: 40 background sleeps cannot all start.
	out, _, _ = run(t, j, "for i in $(seq 40); do sleep 5 & done 2>&1 | head -1; echo done")
	if !strings.Contains(out, "fork") && !strings.Contains(out, "Cannot") {
		t.Errorf("40 processes started under a cap of 20: %q", out)
	}
	if !j.ProcessesCapped() || !strings.Contains(j.Status(), "runs as uid "+id) {
		t.Errorf("status %q", j.Status())
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct{ user, want string }{
		{"no-such-user-pibot", "unknown user"},
		{"12:x", "bad group"},
	}
	for _, c := range cases {
		_, err := New(Config{User: c.user, NoCgroup: true})
		if os.Geteuid() != 0 {
			c.want = "needs pibot to run as root"
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("user %q: %v, want %q", c.user, err, c.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	cases := map[int64]string{0: "0 B", 1000: "1000 B", 1 << 20: "1 MiB", 2 << 30: "2 GiB", 1536 << 10: "1.5 MiB"}
	for n, want := range cases {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
