package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Layout is what one sandboxed command sees of the host.
type Layout struct {
	// Workspace is mounted read-write at its own path; "/" mounts none.
	Workspace string
	// AllowNet keeps the host's network namespace (and with it the
	// host's abstract Unix sockets); otherwise only a private loopback
	// exists.
	AllowNet bool
	// Deny lists host paths hidden wherever a mounted tree contains them:
	// a directory becomes an empty tmpfs, a file an unreadable node.
	Deny []string
	// Mounts are further host paths shown at their own path, after the
	// workspace: a mount inside another one (or inside the workspace)
	// overrides it there, so a read-only file can sit in a writable
	// directory (the repository of a git worktree: internal/worktree's
	// Mounts).
	Mounts []Mount
}

// Mount is a host file or directory a sandbox shows besides the
// workspace. Its path must exist: bwrap refuses to start otherwise, so a
// mount that protects a path (a read-only file inside a writable
// directory) never silently goes missing.
type Mount struct {
	// Path is absolute, clean and free of symlinks.
	Path string
	// Write mounts it read-write; otherwise it is read-only.
	Write bool
}

// sortedMounts returns ms cleaned and in path order: a mount comes after
// every mount of a directory that contains it, so the innermost one
// decides (bwrap mounts them in this order). Relative paths are dropped.
func sortedMounts(ms []Mount) []Mount {
	var out []Mount
	for _, m := range ms {
		if filepath.IsAbs(m.Path) {
			out = append(out, Mount{Path: filepath.Clean(m.Path), Write: m.Write})
		}
	}
	slices.SortStableFunc(out, func(x, y Mount) int { return strings.Compare(x.Path, y.Path) })
	return out
}

// at is where the host path p (real) appears in the sandbox: below the
// workspace mount when it is inside the workspace (which may be mounted
// at a path with a symlink in it), else at p itself.
func at(p, ws, wsReal string) string {
	if ws != "/" && under(wsReal, p) {
		rel, _ := filepath.Rel(wsReal, p)
		return filepath.Join(ws, rel)
	}
	return p
}

// systemDirs are the host directories mounted read-only: what programs
// need to run. Merged-/usr links (/bin -> usr/bin) are recreated as links.
// /home, /root, /run, /var, /srv, /mnt, /media and /sys are not mounted.
func systemDirs() []string {
	return []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}
}

// hostSecrets are files and directories inside the system directories
// that hold host credentials: hidden like Layout.Deny. Entries may be
// glob patterns.
func hostSecrets() []string {
	return []string{
		"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
		"/etc/security/opasswd", "/etc/ssl/private", "/etc/ssh/ssh_host_*_key",
	}
}

// Args returns bwrap's options for l: the system directories read-only,
// fresh /dev and /proc, private tmpfs /tmp, /var/tmp and home (HOME set to
// it), the workspace read-write and the further mounts (each after those
// that contain it), the denied paths and host secrets masked, every
// namespace unshared (network shared back when allowed), killed with
// its parent, in a new session (no terminal injection).
//
// Args reads the host's file system to see which system directories exist
// and where denied paths really are.
func Args(l Layout) []string {
	var a, mounted []string
	for _, d := range systemDirs() {
		st, err := os.Lstat(d)
		switch {
		case err != nil:
		case st.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", t, d)
			}
		case st.IsDir():
			a = append(a, "--ro-bind", d, d)
			mounted = append(mounted, d)
		}
	}
	a = append(a,
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
		"--tmpfs", "/var/tmp",
		"--tmpfs", HomeDir,
		"--setenv", "HOME", HomeDir,
	)
	if l.AllowNet {
		a = append(a, resolvConf(mounted)...)
	}
	// The workspace comes after the private directories so that a
	// workspace below /tmp or the home directory stays visible.
	ws := filepath.Clean(l.Workspace)
	wsReal := ws
	if r, err := filepath.EvalSymlinks(ws); err == nil {
		wsReal = r
	}
	// The workspace and the further mounts, each after those that
	// contain it where they appear: the innermost decides, as in Sees.
	type bind struct {
		src, dst string
		write    bool
	}
	var binds []bind
	if ws != "/" {
		binds = append(binds, bind{wsReal, ws, true})
	}
	for _, m := range sortedMounts(l.Mounts) {
		binds = append(binds, bind{m.Path, at(m.Path, ws, wsReal), m.Write})
		mounted = append(mounted, m.Path)
	}
	slices.SortStableFunc(binds, func(x, y bind) int { return strings.Compare(x.dst, y.dst) })
	for _, b := range binds {
		opt := "--ro-bind"
		if b.write {
			opt = "--bind"
		}
		a = append(a, opt, b.src, b.dst)
	}
	a = append(a, masks(hostSecrets(), mounted, ws, wsReal)...)
	a = append(a, masks(l.Deny, mounted, ws, wsReal)...)
	a = append(a, "--unshare-all")
	if l.AllowNet {
		a = append(a, "--share-net")
	}
	return append(a, "--die-with-parent", "--new-session")
}

// resolvConf mounts the file /etc/resolv.conf links to when that file is
// outside the mounted directories (systemd-resolved keeps it in /run), so
// that name resolution works when the network is allowed.
func resolvConf(mounted []string) []string {
	r, err := filepath.EvalSymlinks("/etc/resolv.conf")
	if err != nil || r == "/etc/resolv.conf" || underAny(mounted, r) {
		return nil
	}
	if st, err := os.Stat(r); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	return []string{"--ro-bind", r, r}
}

// masks returns the options that hide each existing path of paths (glob
// patterns allowed) where the sandbox would show it: inside a mounted
// system directory at its real path, inside the workspace at its path
// below the workspace mount. Paths nested in another masked directory are
// skipped. Only real paths (symlinks resolved) are masked, so a mask never
// needs a mount point outside what is mounted.
func masks(paths, mounted []string, ws, wsReal string) []string {
	type target struct {
		path string
		dir  bool
	}
	var ts []target
	for _, p := range paths {
		matches := []string{p}
		if strings.ContainsAny(p, "*?[") {
			matches, _ = filepath.Glob(p)
		}
		for _, m := range matches {
			real, err := filepath.EvalSymlinks(m)
			if err != nil {
				continue // nothing there to hide
			}
			st, err := os.Stat(real)
			if err != nil {
				continue
			}
			var at string
			switch {
			case ws != "/" && under(wsReal, real):
				rel, _ := filepath.Rel(wsReal, real)
				at = filepath.Join(ws, rel)
			case underAny(mounted, real):
				at = real
			default:
				continue // not visible in the sandbox
			}
			ts = append(ts, target{at, st.IsDir()})
		}
	}
	slices.SortFunc(ts, func(x, y target) int { return strings.Compare(x.path, y.path) })
	var a []string
	var dirs []string
	for _, t := range ts {
		if underAny(dirs, t.path) {
			continue
		}
		if t.dir {
			a = append(a, "--tmpfs", t.path)
			dirs = append(dirs, t.path)
		} else {
			a = append(a, "--ro-bind", os.DevNull, t.path)
		}
	}
	return a
}

// under reports whether p is root or below it (both clean and absolute).
func under(root, p string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

func underAny(roots []string, p string) bool {
	for _, r := range roots {
		if under(r, p) {
			return true
		}
	}
	return false
}
