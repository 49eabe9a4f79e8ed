package hooks

import "syscall"

// groupAttr puts a child in a process group of its own and has the kernel
// kill it when pibot dies.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
