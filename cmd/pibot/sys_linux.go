package main

import "golang.org/x/sys/unix"

// hardenProcess makes pibot non-dumpable: no core dumps, and its
// /proc/PID/{environ,mem,maps,fd} need CAP_SYS_PTRACE even for its own
// user, which tool commands never have.
func hardenProcess() {
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) //nolint:errcheck // best effort: Linux only
}

// termiosGet is the ioctl that reads a terminal's settings.
const termiosGet = unix.TCGETS
