// Package sandbox runs shell commands under bubblewrap (bwrap) when it is
// installed and works. The sandbox shows only what tools need: the system
// directories read-only, the workspace read-write, and a private /tmp and
// home directory; nothing else of the host (no /home, /root, /run, /var,
// no data directory or configuration of pibot). The network, including
// abstract Unix sockets, is off unless allowed.
//
// New probes bwrap once, because distributions may block the unprivileged
// user namespaces it needs. Mode auto falls back to running commands
// unsandboxed and says so in Status; mode bwrap fails closed. Start runs
// the probe of mode auto in the background, so that a server need not wait
// for it before it listens.
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
// once decided and safe for concurrent use.
type Sandbox struct {
	mode Mode
	deny []string
	// decided is closed once bwrap and status are set (by Start's probe
	// in the background); readers wait for it.
	decided chan struct{}
	bwrap   string // path of a working bwrap; empty when unsandboxed
	status  string
	// cache, when not nil, answered or recorded the probe; fromCache
	// says it answered (no sandbox started in this process).
	cache     *ProbeCache
	fromCache bool
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
	s, err := StartWithProbe(ctx, mode, deny, bin, probe, nil)
	if err != nil {
		return nil, err
	}
	<-s.decided
	return s, nil
}

// Start is New without waiting for the probe of mode auto: it runs in the
// background (bounded by ctx and ProbeBwrap's timeout) and the first
// Active, Status or Wrap waits for it. decided, if not nil, is called with
// the sandbox once the probe is over. Modes off and bwrap are decided
// before Start returns; bwrap still fails closed here.
func Start(ctx context.Context, mode Mode, deny []string, decided func(*Sandbox)) (*Sandbox, error) {
	return StartWithProbe(ctx, mode, deny, "bwrap", ProbeBwrap, decided)
}

// StartWithProbe is Start with the bwrap binary and the probe given
// explicitly, for tests.
func StartWithProbe(ctx context.Context, mode Mode, deny []string, bin string, probe Probe, decided func(*Sandbox)) (*Sandbox, error) {
	mode, err := ParseMode(string(mode))
	if err != nil {
		return nil, err
	}
	s := &Sandbox{mode: mode, deny: slices.Clone(deny), decided: make(chan struct{})}
	return s.start(ctx, bin, probe, decided)
}

// StartCached is Start with the probe's success remembered in cache
// (see ProbeCache): a process that starts often decides from the cache
// at once, without starting a sandbox. bin is bwrap's name on PATH or
// its path.
func StartCached(ctx context.Context, mode Mode, deny []string, bin string, cache ProbeCache, decided func(*Sandbox)) (*Sandbox, error) {
	mode, err := ParseMode(string(mode))
	if err != nil {
		return nil, err
	}
	s := &Sandbox{mode: mode, deny: slices.Clone(deny), decided: make(chan struct{}), cache: &cache}
	probe := func(ctx context.Context, path string) error {
		fromCache, err := cache.Cached(ctx, path)
		s.fromCache = fromCache // before decided is closed
		return err
	}
	return s.start(ctx, bin, probe, decided)
}

// Recheck probes bwrap for real when the sandbox was decided from the
// probe cache, after a sandboxed command failed the way bwrap fails when
// it cannot create a sandbox: an error (and the cache entry removed)
// when it no longer can. It returns nil when commands run unsandboxed or
// the probe ran in this process.
func (s *Sandbox) Recheck(ctx context.Context) error {
	<-s.decided
	if s.bwrap == "" || !s.fromCache {
		return nil
	}
	if err := s.cache.Recheck(ctx, s.bwrap); err != nil {
		return fmt.Errorf("sandbox: bwrap cannot create a sandbox any more (an earlier probe, remembered in %s, said it could; the entry is removed): %w", s.cache.File, err)
	}
	return nil
}

// start decides s: mode auto in the background, the others now.
func (s *Sandbox) start(ctx context.Context, bin string, probe Probe, decided func(*Sandbox)) (*Sandbox, error) {
	if s.mode == ModeAuto {
		go s.decide(ctx, bin, probe, decided)
		return s, nil
	}
	if err := s.resolve(ctx, bin, probe); err != nil {
		return nil, err
	}
	close(s.decided)
	if decided != nil {
		decided(s)
	}
	return s, nil
}

// decide resolves mode auto, then lets readers in.
func (s *Sandbox) decide(ctx context.Context, bin string, probe Probe, decided func(*Sandbox)) {
	_ = s.resolve(ctx, bin, probe) // mode auto falls back; it never fails
	close(s.decided)
	if decided != nil {
		decided(s)
	}
}

// resolve sets bwrap and status for s.mode; mode bwrap fails when bwrap
// cannot create a sandbox.
func (s *Sandbox) resolve(ctx context.Context, bin string, probe Probe) error {
	if s.mode == ModeOff {
		s.status = "sandbox off: bash commands run directly on the host"
		return nil
	}
	path, err := exec.LookPath(bin)
	if err == nil {
		err = probe(ctx, path)
		if err == nil {
			s.bwrap = path
			s.status = "sandbox on (bubblewrap): system directories read-only, workspace read-write, private /tmp and home, nothing else of the host"
			return nil
		}
		err = fmt.Errorf("bwrap cannot create a sandbox (unprivileged user namespaces may be disabled): %w", err)
	} else if runtime.GOOS != "linux" {
		err = fmt.Errorf("bubblewrap needs Linux (this is %s)", runtime.GOOS)
	} else {
		err = errors.New("bwrap is not installed")
	}
	if s.mode == ModeBwrap {
		return fmt.Errorf("sandbox: agent.sandbox is bwrap but %w", err)
	}
	s.status = "sandbox unavailable: " + err.Error() + "; bash commands run UNSANDBOXED on the host"
	return nil
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

// Active reports whether commands run inside bwrap (waiting for the
// probe of mode auto).
func (s *Sandbox) Active() bool {
	<-s.decided
	return s.bwrap != ""
}

// Mode returns the configured mode.
func (s *Sandbox) Mode() Mode { return s.mode }

// Status describes the effective isolation in one sentence (waiting for
// the probe of mode auto).
func (s *Sandbox) Status() string {
	<-s.decided
	return s.status
}

// Wrap returns the argv that runs argv in the sandbox with workspace
// writable, the further mounts shown (Layout.Mounts) and cwd as working
// directory; unsandboxed it returns argv. It waits for the probe of mode
// auto.
func (s *Sandbox) Wrap(argv []string, workspace, cwd string, allowNet bool, mounts ...Mount) []string {
	<-s.decided
	if s.bwrap == "" {
		return argv
	}
	out := append([]string{s.bwrap}, Args(Layout{Workspace: workspace, AllowNet: allowNet, Deny: s.deny, Mounts: mounts})...)
	out = append(out, "--chdir", cwd, "--")
	return append(out, argv...)
}
