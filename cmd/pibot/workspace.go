package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/tools"
)

// protected is one of pibot's own files or directories, which tools must
// never reach, with the configuration key that names it.
type protected struct {
	key  string // config key, or "configuration file"
	path string // absolute
}

// protectedPaths returns pibot's own files: the data directory, the
// configuration file and every secret file the configuration names.
func protectedPaths(cfg config.Config) ([]protected, error) {
	var out []protected
	add := func(key, p string) error {
		if p == "" {
			return nil
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return &config.Error{Key: key, Msg: err.Error()}
		}
		out = append(out, protected{key, abs})
		return nil
	}
	errs := []error{add("data_dir", cfg.DataDir), add("configuration file", cfg.File)}
	for _, sec := range cfg.Secrets() {
		if sec.File != "" {
			errs = append(errs, add(sec.Key, sec.File))
		}
	}
	return out, errors.Join(errs...)
}

// prepareWorkspace checks the layout `pibot serve` and `pibot chat` start
// with and returns the absolute workspace and the paths tools must never
// reach (see tools.Options.DenyPaths). The default workspace is created
// (mode 0700) when missing; a configured one must exist. A workspace that
// contains the data directory, the configuration file or a secret file,
// or that lies inside the data directory, is refused: tools would read and
// rewrite who is allowed, sessions and secrets.
func prepareWorkspace(cfg config.Config) (ws string, deny []string, err error) {
	return checkWorkspace(cfg, true)
}

// checkWorkspace is prepareWorkspace; without create a missing default
// workspace is taken as it would be once created (startChecks).
func checkWorkspace(cfg config.Config, create bool) (ws string, deny []string, err error) {
	ws, err = filepath.Abs(cfg.Agent.Workspace)
	if err != nil {
		return "", nil, &config.Error{Key: "agent.workspace", Msg: err.Error()}
	}
	isDefault := cfg.Agent.Workspace == config.Default().Agent.Workspace
	if isDefault && create {
		if err := os.MkdirAll(ws, 0o700); err != nil {
			return "", nil, &config.Error{Key: "agent.workspace", Msg: fmt.Sprintf("cannot create the default workspace %s: %v", ws, err)}
		}
	}
	wsReal := realPrefix(ws)
	st, err := os.Stat(ws)
	switch {
	case err != nil && isDefault && !create && errors.Is(err, fs.ErrNotExist):
		// serve creates it
	case err != nil:
		return "", nil, &config.Error{Key: "agent.workspace", Msg: fmt.Sprintf("%s: %v (create the directory or set agent.workspace to one that exists)", ws, unwrapPathError(err))}
	case !st.IsDir():
		return "", nil, &config.Error{Key: "agent.workspace", Msg: ws + " is not a directory"}
	default:
		if wsReal, err = filepath.EvalSymlinks(ws); err != nil {
			return "", nil, &config.Error{Key: "agent.workspace", Msg: err.Error()}
		}
	}
	prot, err := protectedPaths(cfg)
	if err != nil {
		return "", nil, err
	}
	var errs []error
	for _, p := range prot {
		deny = append(deny, p.path)
		pReal := realPrefix(p.path)
		what, name := p.key+" ("+p.path+")", p.key
		if p.key == "configuration file" {
			what, name = "the configuration file "+p.path, "the configuration file"
		}
		switch {
		case tools.Within(ws, p.path) || tools.Within(wsReal, pReal):
			errs = append(errs, &config.Error{Key: "agent.workspace", Msg: fmt.Sprintf(
				"the workspace %s contains %s: tools could read and change it; set agent.workspace to a directory of its own (default %s) or move %s out of the workspace",
				ws, what, config.Default().Agent.Workspace, name)})
		case p.key == "data_dir" && (tools.Within(p.path, ws) || tools.Within(pReal, wsReal)):
			errs = append(errs, &config.Error{Key: "agent.workspace", Msg: fmt.Sprintf(
				"the workspace %s lies inside data_dir (%s): tools could read and change sessions and pairing state; set agent.workspace to a directory outside data_dir",
				ws, p.path)})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", nil, err
	}
	return ws, deny, nil
}

// unwrapPathError drops the operation and path of a *fs.PathError, which
// the caller already names.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// realPrefix returns p with the symlinks of its longest existing prefix
// evaluated (p itself may not exist yet, as a data directory before the
// first start), or p when they cannot be.
func realPrefix(p string) string {
	if r, err := tools.RealPath(p); err == nil {
		return r
	}
	return p
}

// sharedFileSystem says, in a sentence, when the workspace and the data
// directory (or its nearest existing parent) are on one file system: a
// workspace filled by the tools would then stop pibot from writing
// sessions and its inbox. It is "" when they are apart or either cannot
// be looked at.
func sharedFileSystem(ws, dataDir string, reserve config.Size) string {
	wsDev, ok1 := device(ws)
	dataDev, ok2 := device(existingDir(dataDir))
	if !ok1 || !ok2 || wsDev != dataDev {
		return ""
	}
	s := "the workspace " + ws + " and data_dir " + dataDir + " are on the same file system: "
	if reserve <= 0 {
		return s + "a full workspace would stop pibot from saving messages, and agent.limits.disk_reserve is 0"
	}
	return s + "the tools keep agent.limits.disk_reserve (" + reserve.String() + ") free there; a workspace on a file system of its own keeps them apart for good"
}

// device is the file system id of path.
func device(path string) (uint64, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, false
	}
	return uint64(st.Dev), true //nolint:unconvert // int32 on some platforms
}

// existingDir is dir, or its nearest existing parent.
func existingDir(dir string) string {
	p, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	for {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		next := filepath.Dir(p)
		if next == p {
			return p
		}
		p = next
	}
}
