// Package jail runs one command per call with its own resource limits and
// kills everything the command started when the call ends.
//
// A command is started through a launcher: the pibot binary re-executed
// with a hidden first argument (LauncherArg). Main, called first thing in
// main() (and in TestMain of tests that run commands through a jail),
// turns that process into the launcher: on one locked OS thread it joins
// the call's cgroup, sets the rlimits, drops dangerous capabilities when
// it runs as root, switches user if configured, sets no_new_privs and
// then executes the target. Every limit is therefore in force before the
// first instruction of the command runs.
//
// Where the host allows it (root, or a cgroup delegated to pibot) every
// call gets its own cgroup (v2, or v1 pids and memory controllers) with
// pids.max and a memory limit; when the call ends every process in it is
// killed, including processes that left the process group with setsid.
// As root, calls also run in their own PID namespace, whose processes all
// die with the namespace's first process. Without either, the process
// group is killed and the rlimits still apply.
//
// When pibot's cgroup caps its tasks, all calls together get only what
// the cap leaves beside pibot, less a reserve (see Budget): a tool can
// never take pibot's last thread. Without a pids cgroup of its own that
// holds through RLIMIT_NPROC, which never binds root: a call that would
// run as root under such a cap is refused.
package jail

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// LauncherArg is the hidden first argument that makes the binary a
// launcher (see Main).
const LauncherArg = "__pibot_jail_launcher__"

// Limits are the resource limits of one command. Zero disables a limit.
type Limits struct {
	// Processes caps the processes and threads of one call: pids.max of
	// its cgroup, or without one RLIMIT_NPROC, set to Processes above
	// what the user runs when the call starts (it counts per user and
	// never binds root). Where pibot's cgroup caps its tasks a call gets
	// at most the tools' Budget, whatever Processes says.
	Processes int
	// Memory caps the memory of one call in bytes: the cgroup memory
	// limit, or RLIMIT_DATA of every process without one.
	Memory int64
	// CPUTime caps the CPU time of every process (RLIMIT_CPU).
	CPUTime time.Duration
	// FileSize caps the size of every file a process writes
	// (RLIMIT_FSIZE).
	FileSize int64
}

// Config configures a Jail.
type Config struct {
	Limits Limits
	// User runs commands as this user when pibot runs as root: a name
	// or "uid[:gid]". Empty keeps pibot's user.
	User string
	// Exe is the launcher executable; empty means /proc/self/exe (the
	// running binary, which must call Main first thing).
	Exe string
	// CgroupFS is where cgroups are mounted; empty means /sys/fs/cgroup.
	CgroupFS string
	// NoCgroup disables cgroups (for tests of the fallback).
	NoCgroup bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Jail starts commands with limits. It is safe for concurrent use.
type Jail struct {
	limits  Limits
	exe     string
	cred    *credential // nil keeps pibot's user
	root    bool        // pibot runs as root: PID namespace, capabilities
	cg      *cgroupSet  // nil without cgroups
	host    *pidsCap    // pibot's pids cgroup, read only; nil with cg.pids or when unknown
	status  string
	log     *slog.Logger
	counter atomic.Uint64
}

// New probes the host (cgroups, privileges) once and returns a jail.
// An unknown user is an error.
func New(cfg Config) (*Jail, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &Jail{limits: cfg.Limits, exe: cfg.Exe, root: privileged(), log: log}
	if j.exe == "" {
		j.exe = selfExe()
	}
	if cfg.User != "" && !switchesUsers {
		return nil, fmt.Errorf("jail: running commands as user %q needs Linux", cfg.User)
	}
	if cfg.User != "" {
		if !j.root {
			return nil, fmt.Errorf("jail: running commands as user %q needs pibot to run as root", cfg.User)
		}
		c, err := lookupUser(cfg.User)
		if err != nil {
			return nil, fmt.Errorf("jail: %w", err)
		}
		j.cred = c
	}
	if !cfg.NoCgroup && haveCgroups {
		fs := cfg.CgroupFS
		if fs == "" {
			fs = "/sys/fs/cgroup"
		}
		cg, err := probeCgroups(fs, cfg.Limits, log)
		if err != nil {
			log.Info("per-call cgroups unavailable, using rlimits and process groups", "reason", err.Error())
		} else {
			j.cg = cg
		}
	}
	if haveCgroups && (j.cg == nil || !j.cg.pids) {
		fs := cfg.CgroupFS
		if fs == "" {
			fs = "/sys/fs/cgroup"
		}
		if c, ok := hostCap(fs); ok {
			j.host = &c
		}
	}
	b, known, err := j.budget()
	switch {
	case err != nil:
		log.Warn("jail: tools' process budget", "err", err)
	case known:
		log.Info("tools' process budget", "processes", b.Tools, "cgroup_tasks", b.Host, "kept_for_pibot", b.Reserve)
		if err := j.refusal(b); err != nil {
			log.Error("every bash call will be refused", "err", err)
		}
	}
	j.status = j.describe(b, known)
	return j, nil
}

// minProcesses is the fewest processes a call can do anything with (the
// least agent.limits.processes allows).
const minProcesses = 8

// budget reads the tools' budget now; with a pids cgroup of its own the
// jail also sets it as the limit of all calls together.
func (j *Jail) budget() (Budget, bool, error) {
	if j.cg != nil && j.cg.pids {
		return j.cg.budget()
	}
	if j.host != nil {
		b, ok := j.host.budget(0)
		return b, ok, nil
	}
	return Budget{}, false, nil
}

// refusal says why no call can run under budget b, or returns nil.
func (j *Jail) refusal(b Budget) error {
	if j.host != nil && j.root && (j.cred == nil || j.cred.uid == 0) {
		return fmt.Errorf("jail: pibot's cgroup allows %d processes and pibot cannot create a pids cgroup of its own, "+
			"so nothing would cap a command running as root (RLIMIT_NPROC never binds root) and a fork bomb could take pibot's last thread: "+
			"give pibot a cgroup it may write (systemd Delegate=yes) or set agent.limits.user to another user", b.Host)
	}
	if b.Tools < minProcesses {
		return fmt.Errorf("jail: pibot's cgroup allows %d processes and leaves the tools %d once %d are kept free for pibot: "+
			"too few to run a command; raise the limit of pibot's service (TasksMax, --pids-limit)", b.Host, b.Tools, b.Reserve)
	}
	return nil
}

// Status describes the limits and isolation in force, in one sentence.
func (j *Jail) Status() string { return j.status }

// Contained reports whether every process of a call is killed when it
// ends, even one that left its process group: a cgroup or a PID
// namespace is in force.
func (j *Jail) Contained() bool { return j.cg != nil || j.root }

// ProcessesCapped reports whether the process limit binds every process
// of a call: a pids cgroup, or RLIMIT_NPROC for a user other than root.
func (j *Jail) ProcessesCapped() bool {
	if j.limits.Processes <= 0 || !countsTasks {
		return false
	}
	return (j.cg != nil && j.cg.pids) || j.cred != nil && j.cred.uid != 0 || !j.root
}

// Limits returns the configured limits.
func (j *Jail) Limits() Limits { return j.limits }

func (j *Jail) describe(b Budget, known bool) string {
	var parts []string
	var lim []string
	if l := j.limits; l.Processes > 0 || l.Memory > 0 || l.CPUTime > 0 || l.FileSize > 0 {
		if l.Processes > 0 {
			lim = append(lim, fmt.Sprintf("%d processes", l.Processes))
		}
		if l.Memory > 0 {
			lim = append(lim, FormatBytes(l.Memory)+" memory")
		}
		if l.CPUTime > 0 {
			lim = append(lim, l.CPUTime.String()+" CPU per process")
		}
		if l.FileSize > 0 {
			lim = append(lim, FormatBytes(l.FileSize)+" per file")
		}
		parts = append(parts, "limits: "+strings.Join(lim, ", "))
	} else {
		parts = append(parts, "no resource limits")
	}
	switch {
	case !haveCgroups:
		parts = append(parts, "no cgroups on "+runtime.GOOS+": process groups and rlimits only, the process limit is not enforced")
	case j.cg != nil:
		parts = append(parts, "own "+j.cg.describe())
	case j.limits.Processes > 0 && j.root && (j.cred == nil || j.cred.uid == 0):
		parts = append(parts, "no cgroup: the process limit does not bind root")
	default:
		parts = append(parts, "no cgroup")
	}
	if known {
		parts = append(parts, fmt.Sprintf("all calls together at most %d processes at start (pibot's cgroup allows %d, %d kept free for pibot)", b.Tools, b.Host, b.Reserve))
	}
	if j.root {
		parts = append(parts, "own PID namespace", "dangerous capabilities dropped")
	}
	if j.cred != nil {
		parts = append(parts, fmt.Sprintf("runs as uid %d", j.cred.uid))
	}
	return strings.Join(parts, "; ")
}

// Cmd is one command in its jail. Use Cmd.Cmd like an exec.Cmd (set Dir,
// Env, Stdout, Stderr, then Start and Wait), Kill to end it and Close when
// done.
type Cmd struct {
	*exec.Cmd
	j      *Jail
	cg     *cgroup // nil without cgroups
	pid    int     // launcher pid, once started
	procs  int     // the call's process limit in force
	budget Budget  // the tools' budget when the call began
}

// Command prepares argv to run in a new jail. The caller must call Close.
// Where pibot's cgroup caps its tasks the call's process limit is at most
// the tools' budget, and when that is too small (or would not bind, see
// the package comment) the call is refused.
func (j *Jail) Command(argv []string) (*Cmd, error) {
	if j.limits.FileSize > 0 {
		return j.command(argv, j.limits.FileSize)
	}
	return j.command(argv, -1)
}

// CommandFileSize is Command with RLIMIT_FSIZE at fileSize instead of
// Limits.FileSize: no process of the command can make a file larger
// (SIGXFSZ). At 0 no file can grow at all, while deleting and truncating
// files still work. pibot lowers it to the free space above its disk
// reserve, and to 0 when the workspace is over its quota.
func (j *Jail) CommandFileSize(argv []string, fileSize int64) (*Cmd, error) {
	return j.command(argv, max(fileSize, 0))
}

func (j *Jail) command(argv []string, fileSize int64) (*Cmd, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("jail: empty command")
	}
	procs := j.limits.Processes
	b, known, err := j.budget()
	if err != nil {
		return nil, fmt.Errorf("jail: %w", err)
	}
	if known {
		if err := j.refusal(b); err != nil {
			return nil, err
		}
		if procs == 0 || b.Tools < procs {
			procs = b.Tools
		}
	}
	s := spec{Rlimits: j.rlimits(procs, fileSize), DropCaps: j.root}
	c := &Cmd{j: j, procs: procs, budget: b}
	if j.cg != nil {
		cg, err := j.cg.create(fmt.Sprintf("p%d-%d", os.Getpid(), j.counter.Add(1)), procs)
		if err != nil {
			return nil, fmt.Errorf("jail: %w", err)
		}
		c.cg = cg
		s.Cgroups = cg.dirs()
	}
	if j.cred != nil {
		s.UID, s.GID, s.Groups = &j.cred.uid, &j.cred.gid, j.cred.groups
	}
	enc, err := s.encode()
	if err != nil {
		c.Close()
		return nil, err
	}
	c.Cmd = exec.Command(j.exe, append([]string{LauncherArg, enc}, argv...)...)
	c.Cmd.SysProcAttr = procAttr(j.root)
	return c, nil
}

// rlimits are the limits of one command whose process limit is procs,
// fileSize its RLIMIT_FSIZE (negative: none).
func (j *Jail) rlimits(procs int, fileSize int64) []rlimit {
	var out []rlimit
	l := j.limits
	if procs > 0 && countsTasks && (j.cg == nil || !j.cg.pids) {
		// RLIMIT_NPROC counts every process and thread of the user,
		// pibot's and the user's others included: allow procs more than
		// the user runs now. Under a budget, procs is what the cap leaves
		// now, so calls running at once share it.
		uid := os.Geteuid()
		if j.cred != nil {
			uid = j.cred.uid
		}
		n := uint64(userTasks(uid) + procs)
		out = append(out, rlimit{Res: rlimitNPROC, Cur: n, Max: n})
	}
	if l.Memory > 0 && (j.cg == nil || !j.cg.memory) {
		out = append(out, rlimit{Res: rlimitDATA, Cur: uint64(l.Memory), Max: uint64(l.Memory)})
	}
	if l.CPUTime > 0 {
		s := uint64((l.CPUTime + time.Second - 1) / time.Second)
		// SIGXCPU at the soft limit, SIGKILL a little later.
		out = append(out, rlimit{Res: rlimitCPU, Cur: s, Max: s + 5})
	}
	if fileSize >= 0 {
		out = append(out, rlimit{Res: rlimitFSIZE, Cur: uint64(fileSize), Max: uint64(fileSize)})
	}
	return out
}

// Start starts the command.
func (c *Cmd) Start() error {
	if err := c.Cmd.Start(); err != nil {
		return fmt.Errorf("jail: %w", err)
	}
	c.pid = c.Cmd.Process.Pid
	return nil
}

// Kill SIGKILLs every process of the command: its cgroup, its PID
// namespace (by killing its first process) and its process group.
func (c *Cmd) Kill() {
	if c.cg != nil {
		c.cg.kill()
	}
	if c.pid > 0 {
		killGroup(c.pid)
	}
}

// Events says which limits the command hit.
type Events struct {
	// OOMKills counts processes the kernel killed at the memory limit.
	OOMKills int
	// ForkFailures counts forks refused by the process limit.
	ForkFailures int
	// Processes is the call's process limit in force: Limits.Processes,
	// or the tools' budget when that was smaller (0: none).
	Processes int
	// Budget is the tools' budget when the call began; Host is 0 when
	// nothing capped pibot.
	Budget Budget
}

// Close kills whatever is left of the command, reads which limits were
// hit and removes the cgroup. Call it after Wait (or when Start failed).
func (c *Cmd) Close() Events {
	c.Kill()
	if c.cg == nil {
		return Events{Processes: c.procs, Budget: c.budget}
	}
	ev := c.cg.events()
	ev.Processes, ev.Budget = c.procs, c.budget
	if err := c.cg.remove(); err != nil {
		c.j.log.Warn("jail: remove cgroup", "err", err)
	}
	c.cg = nil
	return ev
}

// killGroup SIGKILLs the process group repeatedly until it is gone (or
// only zombies waiting for their reaper are left), so processes forked
// while it is being killed die too.
func killGroup(pgid int) {
	for range 20 {
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err == syscall.ESRCH {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FormatBytes renders a size in binary units ("2 GiB", "1.5 MiB").
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%d %s", int64(v), units[u])
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}
