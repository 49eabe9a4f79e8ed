//go:build linux

package jail

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/tools/jail/jailtest"
)

// hostTasks is pids.max of the cgroup TestForkBombUnderHostBudget runs
// its helper in: what a service manager or a container runtime gives
// pibot, below the default agent.limits.processes (1024).
const hostTasks = 300

// TestForkBombUnderHostBudget replays issue #29: pibot runs in a cgroup
// that allows 300 tasks, the call's own limit is 1,024, and a fork bomb
// runs through the jail. The bomb gets what the cap leaves less pibot's
// reserve, so pibot (a helper process of this test binary, standing for
// it) still starts threads and processes while the bomb holds all it can,
// and the call reports the limit it hit. Before the budget, the bomb took
// the cgroup's last task and pibot died ("runtime/cgo: pthread_create
// failed"). pibot runs as root (each call in its own PID namespace too)
// and as a user the cgroup is delegated to (systemd's User= with
// Delegate=yes), whose bomb keeps every process it forks; and without a
// cgroup of its own (NoCgroup): as a user the budget holds through
// RLIMIT_NPROC, as root the call is refused.
// budgetUID and runAsUID are uids no other test uses (nor any account on
// the host): RLIMIT_NPROC counts a uid's tasks host-wide, so a test in
// another package running as nobody at the same time (e2e's fork bomb)
// would change the count these tests take and free.
const (
	budgetUID = 64901
	runAsUID  = 64902
)

func TestForkBombUnderHostBudget(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a pids cgroup needs root")
	}
	tests := []struct {
		name     string
		uid, gid int // userUID: a uid of this package's own
		bomb     string
		noCgroup bool
	}{
		{"root", -1, -1, churningBomb, false},
		{"user", budgetUID, budgetUID, holdingBomb, false},
		{"root without cgroups", -1, -1, churningBomb, true},
		{"user without cgroups", budgetUID, budgetUID, holdingBomb, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.uid != -1 {
				// RLIMIT_NPROC counts the user's tasks everywhere: those
				// an earlier bomb left dying would be counted as the
				// user's own at the call's start and give this bomb
				// their places once reaped.
				for deadline := time.Now().Add(10 * time.Second); userTasks(tt.uid) > 0; time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("uid %d still runs %d tasks", tt.uid, userTasks(tt.uid))
					}
				}
			}
			cg := jailtest.PidsCgroup(t, hostTasks)
			helper := cg.Command(t, tt.uid, tt.gid, testBinary(t), "-test.run=^TestBudgetHelper$", "-test.v")
			helper.Env = append(os.Environ(), "JAIL_BUDGET_HELPER=1", "JAIL_BUDGET_BOMB="+tt.bomb, fmt.Sprint("JAIL_BUDGET_NOCGROUP=", tt.noCgroup))
			began := time.Now()
			out, err := helper.CombinedOutput()
			if err != nil {
				t.Fatalf("the helper (pibot in a cgroup of %d tasks) failed: %v\n%s", hostTasks, err, out)
			}
			t.Logf("helper, %v:\n%s", time.Since(began).Round(time.Millisecond), out)
			if !strings.Contains(string(out), "--- PASS: TestBudgetHelper") {
				t.Fatalf("the helper did not pass:\n%s", out)
			}
		})
	}
}

// testBinary returns a copy of this test binary that every user may run.
func testBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pibot-jail-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "jail.test")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBudgetHelper is the helper process of TestForkBombUnderHostBudget,
// started in the small cgroup.
func TestBudgetHelper(t *testing.T) {
	if os.Getenv("JAIL_BUDGET_HELPER") != "1" {
		t.Skip("helper process only")
	}
	noCgroup := os.Getenv("JAIL_BUDGET_NOCGROUP") == "true"
	j, err := New(Config{Limits: Limits{Processes: 1024}, NoCgroup: noCgroup,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("jail: %s", j.Status())
	if !noCgroup && (j.cg == nil || !j.cg.pids) {
		t.Fatalf("no pids cgroup below the test's: %s", j.Status())
	}
	host, ok := hostCap("/sys/fs/cgroup")
	if !ok {
		t.Fatal("the test's cgroup is not found")
	}
	c, err := j.Command([]string{"/bin/sh", "-c", os.Getenv("JAIL_BUDGET_BOMB") + "; sleep 3"})
	if noCgroup && os.Geteuid() == 0 {
		if err == nil || !strings.Contains(err.Error(), "RLIMIT_NPROC never binds root") {
			t.Fatalf("a root call without a cgroup under a cap of %d: %v, want it refused", hostTasks, err)
		}
		t.Logf("refused: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the bomb holds all it can get: the cap's room down to
	// pibot's reserve, or (the churning bomb) forks refused.
	deadline := time.Now().Add(20 * time.Second)
	for {
		room, _, _ := host.room()
		if room <= Reserve(hostTasks)+4 || c.cg != nil && keyed(readFile(filepath.Join(c.cg.pidsDir, "pids.events")), "max") > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bomb never reached its limit: room %d", room)
		}
		time.Sleep(10 * time.Millisecond)
	}
	room, _, _ := host.room()
	// pibot meanwhile: 40 new threads and a process.
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			runtime.LockOSThread() // a fresh OS thread per goroutine
			time.Sleep(20 * time.Millisecond)
		})
	}
	wg.Wait()
	if out, err := exec.Command("sh", "-c", "echo alive").Output(); err != nil || string(out) != "alive\n" {
		t.Fatalf("cannot start a process during the bomb: %q %v", out, err)
	}
	_ = c.Wait()
	ev := c.Close()
	b := ev.Budget
	t.Logf("the bomb left %d tasks free; budget %+v, call limit %d, %d forks refused", room, b, ev.Processes, ev.ForkFailures)
	if b.Host != hostTasks || b.Reserve != Reserve(hostTasks) || b.Tools <= 0 || b.Tools > hostTasks-b.Reserve {
		t.Errorf("budget %+v, want %d less a reserve of %d less what pibot runs", b, hostTasks, Reserve(hostTasks))
	}
	if ev.Processes != b.Tools {
		t.Errorf("call limit %d, want the budget, %d", ev.Processes, b.Tools)
	}
	if c.cg != nil && ev.ForkFailures == 0 {
		t.Error("no fork refused")
	}
	if room < b.Reserve-10 {
		t.Errorf("the bomb left %d tasks free, want about the reserve of %d", room, b.Reserve)
	}
	fmt.Println("bomb contained")
}

// churningBomb is the classic fork bomb: its processes fork and exit.
const churningBomb = "b() { b | b & }; b"

// holdingBomb forks processes that stay (sleeps) from four loops that
// never stop trying: it takes every task it can and every one that is
// freed. (Run as root, in a PID namespace, some hosts kill it early.)
const holdingBomb = "for i in 1 2 3 4; do (while :; do sleep 100 & done) 2>/dev/null & done"
