//go:build !linux

package jail

import (
	"os"
	"syscall"
)

// Platform abilities outside Linux (macOS): no cgroups, no PID
// namespaces, no capabilities, no per-call task count (RLIMIT_NPROC would
// count every process of the user, so the process limit is not set).
// Calls still get their own process group, which is killed when they
// end, and the CPU, memory and file size rlimits.
const (
	haveCgroups   = false
	countsTasks   = false
	switchesUsers = false
)

// privileged is false: without namespaces and capabilities there is
// nothing root could give up for a call.
func privileged() bool { return false }

// selfExe is the running binary (no /proc outside Linux).
func selfExe() string {
	exe, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return exe
}

// procAttr starts the launcher in its own process group.
func procAttr(bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// userTasks is not counted outside Linux (countsTasks is false).
func userTasks(int) int { return 0 }
