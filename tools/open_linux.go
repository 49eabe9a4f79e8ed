package tools

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openNoMagic opens path like os.OpenFile, but the kernel refuses to
// follow magic links on the way (/proc/PID/root, /proc/PID/fd/N, …:
// openat2 RESOLVE_NO_MAGICLINKS). Kernels (or seccomp filters) without
// openat2 open it the usual way; the opened file is checked afterwards in any case.
func openNoMagic(path string, flag int, perm os.FileMode) (*os.File, error) {
	how := unix.OpenHow{Flags: uint64(flag | unix.O_CLOEXEC), Resolve: unix.RESOLVE_NO_MAGICLINKS}
	if flag&os.O_CREATE != 0 {
		how.Mode = uint64(perm.Perm())
	}
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), path), nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			// No openat2, or a seccomp filter refuses it (older container
			// runtimes answer EPERM); a real EPERM comes back again.
			return os.OpenFile(path, flag, perm)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
}

// kernelFile reports whether f is on a file system of process or kernel
// state: proc, sysfs, cgroups, debugfs, tracefs, securityfs, bpf,
// configfs, efivarfs, pstore, devpts, binfmt_misc, selinuxfs.
func kernelFile(f *os.File) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return false
	}
	return kernelFS(uint32(st.Type)) //nolint:gosec,unconvert // magic numbers fit 32 bits; the type differs by platform
}

// kernelFS reports whether a statfs f_type is one of those.
func kernelFS(typ uint32) bool {
	switch typ {
	case unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC, unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC,
		unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC, unix.BPF_FS_MAGIC,
		unix.EFIVARFS_MAGIC, unix.PSTOREFS_MAGIC, unix.DEVPTS_SUPER_MAGIC, unix.BINFMTFS_MAGIC,
		unix.SELINUX_MAGIC, 0x62656570: // configfs
		return true
	}
	return false
}

// kernelDir reports whether the directory dir is on a file system of
// process or kernel state (a proc or sysfs mounted somewhere else).
func kernelDir(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	return kernelFS(uint32(st.Type)) //nolint:gosec,unconvert // as above
}

// openedPath is the path the kernel resolved when f was opened (as
// /proc/self/fd shows it), if /proc is mounted.
func openedPath(f *os.File) (string, bool) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil || len(p) == 0 || p[0] != '/' {
		return "", false
	}
	return p, true
}
