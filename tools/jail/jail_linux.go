package jail

import (
	"os"
	"syscall"
)

// Platform abilities: Linux has them all.
const (
	haveCgroups   = true
	countsTasks   = true
	switchesUsers = true
)

// privileged reports whether calls get a PID namespace and lose
// dangerous capabilities: pibot runs as root.
func privileged() bool { return os.Geteuid() == 0 }

// selfExe is the running binary.
func selfExe() string { return "/proc/self/exe" }

// procAttr starts the launcher in its own process group, killed with
// pibot, and as root in its own PID namespace.
func procAttr(root bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if root {
		attr.Cloneflags = syscall.CLONE_NEWPID
	}
	return attr
}

// userTasks counts the processes and threads of uid.
func userTasks(uid int) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid {
			tasks, _ := os.ReadDir("/proc/" + e.Name() + "/task")
			n += len(tasks)
		}
	}
	return n
}
