package jail

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// keptCaps are the capabilities a root command keeps: those of a default
// container, less mknod and setpcap. Everything else goes, in particular
// CAP_SYS_PTRACE (reading pibot's memory and environment), CAP_SYS_ADMIN,
// CAP_DAC_READ_SEARCH (open_by_handle_at), CAP_SYS_RAWIO, CAP_SYS_MODULE,
// CAP_BPF, CAP_PERFMON and CAP_SYS_RESOURCE (lifting the rlimits).
func keptCaps() []int {
	return []int{
		unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID,
		unix.CAP_KILL, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_NET_BIND_SERVICE,
		unix.CAP_NET_RAW, unix.CAP_SYS_CHROOT, unix.CAP_AUDIT_WRITE, unix.CAP_SETFCAP,
	}
}

// launch applies the spec on this (locked) thread and executes argv; it
// returns only on error. Credentials, capabilities and no_new_privs are
// per thread; execve makes the calling thread's the process's.
func launch(specJSON string, argv []string) error {
	runtime.LockOSThread()
	var s spec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		return fmt.Errorf("bad spec: %w", err)
	}
	for _, dir := range s.Cgroups {
		if err := os.WriteFile(dir+"/cgroup.procs", []byte("0"), 0); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	for _, r := range s.Rlimits {
		res, ok := map[string]int{rlimitNPROC: unix.RLIMIT_NPROC, rlimitDATA: unix.RLIMIT_DATA,
			rlimitCPU: unix.RLIMIT_CPU, rlimitFSIZE: unix.RLIMIT_FSIZE}[r.Res]
		if !ok {
			return fmt.Errorf("unknown rlimit %q", r.Res)
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: r.Cur, Max: r.Max}); err != nil {
			return fmt.Errorf("set rlimit %s: %w", r.Res, err)
		}
	}
	if s.DropCaps {
		if err := dropBounding(); err != nil {
			return err
		}
	}
	if s.UID != nil {
		if err := switchUser(*s.UID, *s.GID, s.Groups); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if s.DropCaps && (s.UID == nil || *s.UID == 0) {
		if err := limitCaps(); err != nil {
			return err
		}
	}
	// A change of credentials cleared the parent-death signal.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("set parent-death signal: %w", err)
	}
	path := argv[0]
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return err
		}
		path = p
	}
	return fmt.Errorf("exec %s: %w", argv[0], unix.Exec(path, argv, os.Environ()))
}

func kept(c int) bool {
	for _, k := range keptCaps() {
		if k == c {
			return true
		}
	}
	return false
}

// lastCap is the highest capability the kernel knows.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return unix.CAP_LAST_CAP
}

// dropBounding removes every capability but keptCaps from the bounding
// set, so that no execve (of a setuid binary or as root) regains it.
func dropBounding() error {
	for c := 0; c <= lastCap(); c++ {
		if kept(c) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// limitCaps reduces the effective, permitted and inheritable sets to
// keptCaps (inheritable to none) and clears the ambient set.
func limitCaps() error {
	var mask [2]uint32
	for _, c := range keptCaps() {
		mask[c/32] |= 1 << (c % 32)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("get capabilities: %w", err)
	}
	for i := range data {
		data[i].Effective &= mask[i]
		data[i].Permitted &= mask[i]
		data[i].Inheritable = 0
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("set capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	return nil
}

// switchUser sets the groups, gid and uid of this thread only (raw
// system calls: the thread executes the target right after).
func switchUser(uid, gid int, groups []int) error {
	gs := make([]uint32, len(groups))
	for i, g := range groups {
		gs[i] = uint32(g)
	}
	var e unix.Errno
	if len(gs) > 0 {
		_, _, e = unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(gs)), uintptr(unsafe.Pointer(&gs[0])), 0)
	} else {
		_, _, e = unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0)
	}
	if e != 0 {
		return fmt.Errorf("set groups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("set gid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("set uid %d: %w", uid, e)
	}
	return nil
}
