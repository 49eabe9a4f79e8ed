package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// Access is how a command in the sandbox sees a host path.
type Access int

// What a sandboxed command sees of a host path.
const (
	// Hidden: the path is not there (not mounted, masked, or one of the
	// sandbox's own /proc and /dev).
	Hidden Access = iota
	// Private: the path lies in a directory the sandbox replaces with an
	// empty tmpfs of its own for each command (/tmp, /var/tmp, the home
	// directory): the host's file is not there.
	Private
	// ReadOnly: the host's file, mounted read-only.
	ReadOnly
	// ReadWrite: the host's file, writable (the workspace).
	ReadWrite
)

// String names the access for messages.
func (a Access) String() string {
	switch a {
	case Private:
		return "private"
	case ReadOnly:
		return "read-only"
	case ReadWrite:
		return "read-write"
	}
	return "hidden"
}

// View is a Layout prepared for Sees: what Args reads of the host's file
// system (which system directories exist, where the workspace and the
// masked paths really are) is read once, when View is called.
type View struct {
	ws, wsReal string
	mounted    []string
	mounts     []Mount  // Layout.Mounts, in path order
	masked     []string // clean paths, lexical and real
	resolv     string   // the resolv.conf target mounted, or ""
}

// View prepares l for Sees.
func (l Layout) View() View {
	v := View{ws: filepath.Clean(l.Workspace)}
	v.wsReal = v.ws
	if r, err := filepath.EvalSymlinks(v.ws); err == nil {
		v.wsReal = r
	}
	for _, d := range systemDirs() {
		if st, err := os.Lstat(d); err == nil && st.IsDir() {
			v.mounted = append(v.mounted, d)
		}
	}
	v.mounts = sortedMounts(l.Mounts)
	v.masked = maskedPaths(append(hostSecrets(), l.Deny...))
	if l.AllowNet {
		if a := resolvConf(v.mounted); len(a) == 3 {
			v.resolv = a[2]
		}
	}
	return v
}

// Sees reports how a command in the sandbox of l sees the host path p
// (absolute, clean, symlinks resolved): the same mounts and masks Args
// sets up, decided without starting bwrap.
func (l Layout) Sees(p string) Access { return l.View().Sees(p) }

// Sees reports how a command in the sandbox sees the host path p
// (absolute, clean, symlinks resolved).
func (v View) Sees(p string) Access {
	p = filepath.Clean(p)
	if underAny(v.masked, p) {
		return Hidden
	}
	if a, ok := v.bound(p); ok {
		return a
	}
	switch {
	case under("/tmp", p) || under("/var/tmp", p) || under(HomeDir, p):
		return Private
	case under("/dev", p) || under("/proc", p):
		return Hidden
	case underAny(v.mounted, p):
		return ReadOnly
	case v.resolv != "" && v.resolv == p:
		return ReadOnly
	}
	return Hidden
}

// bound is how the innermost of the workspace and the further mounts
// that contains p shows it; false when none does.
func (v View) bound(p string) (Access, bool) {
	best, a := "", Hidden
	if v.ws != "/" && under(v.wsReal, p) {
		best, a = v.wsReal, ReadWrite
	}
	for _, m := range v.mounts {
		if under(m.Path, p) && len(m.Path) >= len(best) {
			best, a = m.Path, ReadOnly
			if m.Write {
				a = ReadWrite
			}
		}
	}
	return a, best != ""
}

// HostSecrets returns the host's credential files and directories that
// the sandbox masks (/etc/shadow, /etc/ssl/private, the ssh host keys,
// …) as they exist now: clean paths, each also at its real location.
func HostSecrets() []string { return maskedPaths(hostSecrets()) }

// maskedPaths expands paths (glob patterns allowed) to the clean paths
// they name, each also at its real location.
func maskedPaths(paths []string) []string {
	var out []string
	for _, m := range paths {
		matches := []string{m}
		if strings.ContainsAny(m, "*?[") {
			matches, _ = filepath.Glob(m)
		}
		for _, x := range matches {
			x = filepath.Clean(x)
			out = append(out, x)
			if r, err := filepath.EvalSymlinks(x); err == nil && r != x {
				out = append(out, r)
			}
		}
	}
	return out
}
