// Package sandbox runs shell commands under bubblewrap (bwrap) when it is
// installed and works. The sandbox shows only what tools need: the system
// directories read-only, the workspace read-write, and a private /tmp and
// home directory; nothing else of the host (no /home, /root, /run, /var,
// no data directory or configuration of pibot). The network, including
// abstract Unix sockets, is off unless allowed.
//
// New probes bwrap once, because distributions may block the unprivileged
// user namespaces it needs. Mode auto falls back to running commands
// unsandboxed and says so in Status; mode bwrap fails closed.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// HomeDir is the home directory inside the sandbox: an empty tmpfs that
// lives as long as one command. HOME is set to it.
const HomeDir = "/home/sandbox"

// Mode selects how commands are isolated.
type Mode string

// Sandbox modes (config key agent.sandbox).
const (
	// ModeOff runs commands directly.
	ModeOff Mode = "off"
	// ModeAuto uses bwrap when it works and runs unsandboxed otherwise.
	ModeAuto Mode = "auto"
	// ModeBwrap requires bwrap and fails when it does not work.
	ModeBwrap Mode = "bwrap"
)

// ParseMode validates a configured mode; "" means off.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ModeOff:
		return ModeOff, nil
	case ModeAuto, ModeBwrap:
		return Mode(s), nil
	}
	return "", fmt.Errorf("sandbox: unknown mode %q (want auto, bwrap or off)", s)
}

// Sandbox wraps command lines for the chosen isolation. It is immutable
// and safe for concurrent use.
type Sandbox struct {
	mode   Mode
	bwrap  string // path of a working bwrap; empty when unsandboxed
	deny   []string
	status string
}

// Probe reports whether the bwrap binary at path can start a sandbox.
type Probe func(ctx context.Context, path string) error

// New resolves mode against the host. Mode bwrap returns an error when
// bwrap is missing or cannot create a sandbox. deny lists host paths
// (files or directories: pibot's data directory, configuration file and
// secret files) that are hidden inside the sandbox even where a mounted
// directory contains them.
func New(ctx context.Context, mode Mode, deny []string) (*Sandbox, error) {
	return NewWithProbe(ctx, mode, deny, "bwrap", ProbeBwrap)
}

// NewWithProbe is New with the bwrap binary (name on PATH or path) and the
// probe given explicitly, for tests.
func NewWithProbe(ctx context.Context, mode Mode, deny []string, bin string, probe Probe) (*Sandbox, error) {
	mode, err := ParseMode(string(mode))
	if err != nil {
		return nil, err
	}
	if mode == ModeOff {
		return &Sandbox{mode: mode, status: "sandbox off: bash commands run directly on the host"}, nil
	}
	path, err := exec.LookPath(bin)
	if err == nil {
		err = probe(ctx, path)
		if err == nil {
			return &Sandbox{mode: mode, bwrap: path, deny: slices.Clone(deny),
				status: "sandbox on (bubblewrap): system directories read-only, workspace read-write, private /tmp and home, nothing else of the host"}, nil
		}
		err = fmt.Errorf("bwrap cannot create a sandbox (unprivileged user namespaces may be disabled): %w", err)
	} else if runtime.GOOS != "linux" {
		err = fmt.Errorf("bubblewrap needs Linux (this is %s)", runtime.GOOS)
	} else {
		err = errors.New("bwrap is not installed")
	}
	if mode == ModeBwrap {
		return nil, fmt.Errorf("sandbox: agent.sandbox is bwrap but %w", err)
	}
	return &Sandbox{mode: mode, status: "sandbox unavailable: " + err.Error() + "; bash commands run UNSANDBOXED on the host"}, nil
}

// ProbeBwrap starts a trivial command in the layout New builds, without a
// workspace.
func ProbeBwrap(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := Args(Layout{Workspace: "/"})
	args = append(args, "--", "true")
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		if s := strings.TrimSpace(string(out)); s != "" {
			return fmt.Errorf("%w: %s", err, s)
		}
		return err
	}
	return nil
}

// Active reports whether commands run inside bwrap.
func (s *Sandbox) Active() bool { return s.bwrap != "" }

// Mode returns the configured mode.
func (s *Sandbox) Mode() Mode { return s.mode }

// Status describes the effective isolation in one sentence.
func (s *Sandbox) Status() string { return s.status }

// Wrap returns the argv that runs argv in the sandbox with workspace
// writable and cwd as working directory; unsandboxed it returns argv.
func (s *Sandbox) Wrap(argv []string, workspace, cwd string, allowNet bool) []string {
	if s.bwrap == "" {
		return argv
	}
	out := append([]string{s.bwrap}, Args(Layout{Workspace: workspace, AllowNet: allowNet, Deny: s.deny})...)
	out = append(out, "--chdir", cwd, "--")
	return append(out, argv...)
}
