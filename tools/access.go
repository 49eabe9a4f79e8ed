package tools

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pibot/pibot/tools/sandbox"
)

// access is what one file tool call may reach: the workspace's rules,
// with the call's rights and the sandbox's layout read once when the call
// starts.
//
//   - Every call: pibot's own files (the denied paths), /proc, /sys and
//     /dev, and the host's credential files (/etc/shadow, …) are refused,
//     lexically, through symlinks, and again on the file actually opened.
//   - A confined call works through an os.Root on the workspace: the
//     kernel resolves every path beneath it (openat2 RESOLVE_BENEATH on
//     Linux), so no symlink, ".." or swapped component leads out, even
//     one that appears between the check and the open.
//   - An unconfined call sees what bash sees: with the sandbox active, the
//     sandbox's layout (the workspace read-write, the system directories
//     read-only, nothing else); without it, the host as pibot's user sees
//     it. It opens without following magic links (/proc/PID/root, …), and
//     the file opened is checked again by the path the kernel resolved.
type access struct {
	w        *Workspace
	confined bool
	view     *sandbox.View // the sandbox's layout; nil when unsandboxed
	secrets  []string      // the host's credentials, hidden in every mode
}

// call starts a file tool call: it decides the call's rights and reads
// the sandbox's layout (waiting for the probe of mode auto).
func (w *Workspace) call() *access {
	a := &access{w: w, confined: w.Confined()}
	if a.confined {
		return a
	}
	if w.sb != nil && w.sb.Active() {
		v := sandbox.Layout{Workspace: w.root, AllowNet: w.allowNet, Deny: w.deny, Mounts: w.sandboxMounts()}.View()
		a.view = &v
	}
	a.secrets = sandbox.HostSecrets()
	return a
}

// confinedCall is call for a tool that never leaves the workspace
// (attach).
func (w *Workspace) confinedCall() *access { return &access{w: w, confined: true} }

// kernelPath reports whether p (clean and absolute) is in /proc, /sys or
// /dev: process and kernel state, never a file tool's business.
func kernelPath(p string) bool {
	return Within("/proc", p) || Within("/sys", p) || Within("/dev", p)
}

// sees is how the call sees the host path real (symlinks resolved).
func (a *access) sees(real string) sandbox.Access {
	switch {
	case underAny(a.secrets, real):
		return sandbox.Hidden
	case a.view != nil:
		return a.view.Sees(real)
	}
	return sandbox.ReadWrite
}

// check applies the rules to a path: abs as the tool resolved it
// lexically, real where it leads (symlinks followed); write asks for a
// writable path.
func (a *access) check(orig, abs, real string, write bool) error {
	w := a.w
	if w.denied(abs) || w.denied(real) {
		return deniedError(orig)
	}
	if kernelPath(abs) || kernelPath(real) {
		return kernelError(orig)
	}
	if a.confined {
		if !Within(w.root, abs) && !Within(w.realRoot, abs) || !Within(w.realRoot, real) {
			return a.outsideError(orig)
		}
		return nil
	}
	switch a.sees(real) {
	case sandbox.Hidden:
		if underAny(a.secrets, real) {
			return hostSecretError(orig)
		}
		return hiddenError(orig)
	case sandbox.Private:
		return privateError(orig)
	case sandbox.ReadOnly:
		if write {
			return readOnlyError(orig)
		}
	}
	return nil
}

// resolve returns the absolute path for a tool argument, or why the call
// may not reach it.
func (a *access) resolve(orig string, write bool) (string, error) {
	abs := a.w.absolute(orig)
	real, err := RealPath(abs)
	if err != nil {
		return "", &Error{Text: "Cannot resolve path " + orig + ": " + err.Error(), Err: err}
	}
	if err := a.check(orig, abs, real, write); err != nil {
		return "", err
	}
	return abs, nil
}

// rel is abs relative to the workspace, for the os.Root of a confined
// call.
func (a *access) rel(abs, orig string) (string, error) {
	for _, r := range []string{a.w.root, a.w.realRoot} {
		if Within(r, abs) {
			rel, err := filepath.Rel(r, abs)
			if err == nil {
				return rel, nil
			}
		}
	}
	return "", a.outsideError(orig)
}

// rootError turns an os.Root refusal into the confined call's error; any
// other error is returned as it is.
func (a *access) rootError(err error, orig string) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return failf("Path %s leads outside the workspace (through \"..\" or a symlink that is absolute or leaves it). Only files inside the workspace can be accessed%s.", orig, a.why())
	}
	return err
}

// open opens abs (orig as the tool was given it, resolved already) and
// checks the file opened: its type (a regular file or, unless write, a
// directory), its file system (never /proc or /sys) and the path the
// kernel resolved. flag is os.OpenFile's; a policy refusal is an *Error,
// anything else the system's error.
func (a *access) open(abs, orig string, flag int, perm os.FileMode, write bool) (*os.File, error) {
	flag |= syscall.O_NONBLOCK | syscall.O_NOCTTY
	var f *os.File
	var err error
	if a.confined {
		rel, rerr := a.rel(abs, orig)
		if rerr != nil {
			return nil, rerr
		}
		f, err = a.w.dir.OpenFile(rel, flag, perm)
		err = a.rootError(err, orig)
	} else {
		f, err = openNoMagic(abs, flag, perm)
	}
	switch {
	case errors.Is(err, syscall.ENXIO):
		return nil, notRegularError(orig) // a FIFO without a reader
	case errors.Is(err, syscall.ELOOP) && !a.confined:
		return nil, kernelError(orig) // a magic link (/proc/PID/…): the loops resolve found
	case err != nil:
		return nil, err
	}
	if err := a.verify(f, abs, orig, write); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// verify checks an open file: what it is, where it is, and the path the
// kernel resolved while opening it, so that a symlink swapped in after
// resolve (by a command running alongside) gains nothing.
func (a *access) verify(f *os.File, abs, orig string, write bool) error {
	if kernelFile(f) {
		return kernelError(orig)
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	switch {
	case st.Mode().IsRegular():
	case st.IsDir() && !write:
	case st.IsDir():
		return &Error{Text: "EISDIR: illegal operation on a directory, open '" + abs + "'", Err: syscall.EISDIR}
	default:
		return notRegularError(orig)
	}
	real, ok := openedPath(f)
	if !ok {
		return nil // no /proc: resolve's check stands alone
	}
	return a.check(orig, real, real, write)
}

// stat returns abs's file information (symlinks followed within what the
// call may reach).
func (a *access) stat(abs, orig string) (fs.FileInfo, error) {
	if a.confined {
		rel, err := a.rel(abs, orig)
		if err != nil {
			return nil, err
		}
		st, err := a.w.dir.Stat(rel)
		return st, a.rootError(err, orig)
	}
	return os.Stat(abs)
}

// mkdirAll creates abs and its missing parents (0755).
func (a *access) mkdirAll(abs, orig string) error {
	if a.confined {
		rel, err := a.rel(abs, orig)
		if err != nil {
			return err
		}
		return a.rootError(a.w.dir.MkdirAll(rel, 0o755), orig)
	}
	return os.MkdirAll(abs, 0o755)
}

// readFile reads abs (orig as the tool was given it) through open.
func (a *access) readFile(abs, orig string) ([]byte, error) {
	f, err := a.open(abs, orig, os.O_RDONLY, 0, false)
	if err != nil {
		return nil, ioError(err, "open", abs)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nodeError(err, "read", abs)
	}
	return data, nil
}

// writeFile writes data to abs through open: the file is truncated only
// once the opened file passed the checks.
func (a *access) writeFile(abs, orig string, data []byte, perm os.FileMode) error {
	f, err := a.open(abs, orig, os.O_WRONLY|os.O_CREATE, perm, true)
	if err != nil {
		return ioError(err, "open", abs)
	}
	return a.replace(f, abs, data)
}

// replace truncates the open file f and writes data, then closes f.
func (a *access) replace(f *os.File, abs string, data []byte) error {
	err := f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(data, 0)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nodeError(err, "write", abs)
	}
	return nil
}

// walk visits every entry below root (absolute, resolved) in lexical
// order, skipping .git directories and whatever the call may not reach,
// until fn returns false or ctx ends. It does not follow symlinks below
// root; a confined walk lists directories through the workspace's
// os.Root.
func (a *access) walk(ctx context.Context, root, orig string, fn func(path string, d fs.DirEntry) bool) error {
	realRoot := root
	if r, err := RealPath(root); err == nil {
		realRoot = r
	}
	visit := func(p string, d fs.DirEntry) error {
		if ctx.Err() != nil {
			return errAborted
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || a.check(p, p, filepath.Join(realRoot, rel), false) != nil || d.IsDir() && kernelDir(p) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !fn(p, d) {
			return filepath.SkipAll
		}
		return nil
	}
	if !a.confined {
		return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == root {
					return err
				}
				return nil
			}
			if p == root {
				return nil
			}
			return visit(p, d)
		})
	}
	relRoot, err := a.rel(root, orig)
	if err != nil {
		return err
	}
	relRoot = filepath.ToSlash(relRoot)
	return fs.WalkDir(a.w.dir.FS(), relRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == relRoot {
				return a.rootError(err, orig)
			}
			return nil
		}
		if p == relRoot {
			return nil
		}
		sub, _ := strings.CutPrefix(p, relRoot+"/")
		if relRoot == "." {
			sub = p
		}
		return visit(filepath.Join(root, filepath.FromSlash(sub)), d)
	})
}

// ioError passes a policy refusal (*Error) through and formats any other
// error the way Node does.
func ioError(err error, syscallName, path string) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return nodeError(err, syscallName, path)
}

func underAny(roots []string, p string) bool {
	for _, r := range roots {
		if Within(r, p) {
			return true
		}
	}
	return false
}

// why names the setting that confines the call.
func (a *access) why() string {
	if a.w.only {
		return " (agent.workspace_only is enabled)"
	}
	if a.w.others {
		return " (agent.workspace_only: non_owners confines requests of users who are not owners)"
	}
	return ""
}

func (a *access) outsideError(p string) error {
	return failf("Path %s is outside the workspace. Only files inside the workspace can be accessed%s.", p, a.why())
}

func notRegularError(p string) error {
	return failf("Path %s is not a regular file or directory (a device, pipe or socket): the file tools do not open those.", p)
}

func deniedError(p string) error {
	return failf("Path %s is pibot's own data (data_dir, the configuration file, a secret file or another agent's workspace). Tools never access it.", p)
}

func kernelError(p string) error {
	return failf("Path %s is in /proc, /sys or /dev (process and kernel state): the file tools never access it.", p)
}

func hostSecretError(p string) error {
	return failf("Path %s holds the host's credentials (/etc/shadow, private keys): the file tools never access it.", p)
}

func hiddenError(p string) error {
	return failf("Path %s is not visible to the tools: the bash sandbox (agent.sandbox) shows only the workspace and, read-only, /usr, /etc, /opt, /bin, /sbin and /lib*; the file tools see the same.", p)
}

func privateError(p string) error {
	return failf("Path %s is in /tmp, /var/tmp or the home directory, which the bash sandbox replaces with an empty one for each command: the file tools do not see them. Use a directory in the workspace.", p)
}

func readOnlyError(p string) error {
	return failf("Path %s is read-only: the bash sandbox (agent.sandbox) mounts only the workspace writable; the file tools write only there too.", p)
}
