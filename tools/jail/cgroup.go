package jail

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// toolsDir is the cgroup, below pibot's own, that holds one child per call.
const toolsDir = "pibot-tools"

// cgroupSet is where the cgroups of calls are created: one directory in
// cgroup v2, or one per v1 controller (pids, memory).
type cgroupSet struct {
	v2      bool
	pidsDir string  // parent of call cgroups in the pids hierarchy (v2: the only one)
	memDir  string  // parent in the memory hierarchy (v1 only)
	pids    bool    // pids.max can be set
	memory  bool    // a memory limit can be set
	cap     pidsCap // the caps over pidsDir's parent (pibot's cgroup)
	limits  Limits
	log     *slog.Logger
}

// cgroup is the cgroup of one call.
type cgroup struct {
	set     *cgroupSet
	pidsDir string
	memDir  string // v1 only; "" when absent or v2
	// shared is the max count of the tools' pids.events when the call
	// began (v2 counts a fork refused by the tools' budget there).
	shared int
}

// probeCgroups finds pibot's own cgroup, prepares pibot-tools below it,
// removes the cgroups of dead pibot processes and checks that a call
// cgroup can be created with the limits.
func probeCgroups(fs string, l Limits, log *slog.Logger) (*cgroupSet, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	s := &cgroupSet{limits: l, log: log}
	if _, err := os.Stat(filepath.Join(fs, "cgroup.controllers")); err == nil {
		p, ok := own[""]
		if !ok {
			return nil, errors.New("no cgroup v2 entry in /proc/self/cgroup")
		}
		s.v2 = true
		if err := s.setupV2(filepath.Join(fs, p)); err != nil {
			return nil, err
		}
		s.cap = pidsCap{dir: filepath.Dir(s.pidsDir), root: fs}
	} else {
		for _, ctl := range []string{"pids", "memory"} {
			p, ok := own[ctl]
			if !ok {
				continue
			}
			dir := filepath.Join(fs, ctl, p, toolsDir)
			if err := mkdirProbe(dir); err != nil {
				log.Debug("jail: cgroup v1 controller unusable", "controller", ctl, "err", err)
				continue
			}
			if ctl == "pids" {
				s.pidsDir, s.pids = dir, true
				s.cap = pidsCap{dir: filepath.Dir(dir), root: filepath.Join(fs, ctl)}
			} else {
				s.memDir, s.memory = dir, true
			}
		}
		if !s.pids && !s.memory {
			return nil, errors.New("no writable cgroup v1 pids or memory hierarchy")
		}
	}
	s.sweep()
	b, known, err := s.budget()
	if err != nil {
		return nil, err
	}
	procs := l.Processes
	if known && (procs == 0 || b.Tools < procs) {
		procs = max(b.Tools, 1)
	}
	probe, err := s.create(fmt.Sprintf("p%d-0", os.Getpid()), procs)
	if err != nil {
		return nil, err
	}
	if err := probe.remove(); err != nil {
		return nil, err
	}
	return s, nil
}

// mkdirProbe creates dir (or finds it) and checks that a cgroup can be
// created in it: pibot-tools may be left by a pibot that ran as another
// user.
func mkdirProbe(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	probe := filepath.Join(dir, fmt.Sprintf("p%d-probe", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return err
	}
	return os.Remove(probe)
}

// setupV2 prepares base/pibot-tools with the pids and memory controllers
// enabled for its children. cgroup v2 allows processes only in leaves
// (but the root), so when base holds pibot alone, pibot moves itself to
// base/pibot first.
func (s *cgroupSet) setupV2(base string) error {
	tools := filepath.Join(base, toolsDir)
	if err := os.Mkdir(tools, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s: %w", tools, err)
	}
	s.pidsDir = tools
	avail := words(readFile(filepath.Join(base, "cgroup.controllers")))
	var want []string
	for _, c := range []string{"pids", "memory"} {
		if avail[c] {
			want = append(want, c)
		}
	}
	if len(want) > 0 {
		if err := enable(base, want); err != nil {
			procs := strings.Fields(readFile(filepath.Join(base, "cgroup.procs")))
			if len(procs) != 1 || procs[0] != strconv.Itoa(os.Getpid()) {
				return fmt.Errorf("enable %v in %s: %w", want, base, err)
			}
			leaf := filepath.Join(base, "pibot")
			if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("create %s: %w", leaf, err)
			}
			if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
				return fmt.Errorf("move pibot to %s: %w", leaf, err)
			}
			if err := enable(base, want); err != nil {
				return fmt.Errorf("enable %v in %s: %w", want, base, err)
			}
		}
		if err := enable(tools, want); err != nil {
			return fmt.Errorf("enable %v in %s: %w", want, tools, err)
		}
	}
	on := words(readFile(filepath.Join(tools, "cgroup.subtree_control")))
	s.pids, s.memory = on["pids"], on["memory"]
	return nil
}

func enable(dir string, ctls []string) error {
	on := words(readFile(filepath.Join(dir, "cgroup.subtree_control")))
	var add []string
	for _, c := range ctls {
		if !on[c] {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0)
}

func (s *cgroupSet) describe() string {
	var ctl []string
	if s.pids {
		ctl = append(ctl, "pids")
	}
	if s.memory {
		ctl = append(ctl, "memory")
	}
	v := "v1"
	if s.v2 {
		v = "v2"
	}
	return fmt.Sprintf("cgroup %s per call (%s), every process killed when the call ends", v, strings.Join(ctl, ", "))
}

// budget reads what the caps over pibot's cgroup leave the tools now and
// makes it pids.max of the tools' cgroup, the parent of every call's, so
// that calls running at once cannot add up past it ("max" when nothing
// caps pibot). known is false then, and without a pids controller.
func (s *cgroupSet) budget() (b Budget, known bool, err error) {
	if !s.pids {
		return Budget{}, false, nil
	}
	inUse, _ := readCount(filepath.Join(s.pidsDir, "pids.current"))
	b, known = s.cap.budget(inUse)
	v := "max"
	if known {
		v = strconv.Itoa(b.Tools)
	}
	if err := os.WriteFile(filepath.Join(s.pidsDir, "pids.max"), []byte(v), 0); err != nil {
		return Budget{}, false, fmt.Errorf("set the tools' process budget: %w", err)
	}
	return b, known, nil
}

// create makes the cgroup of one call and sets its limits; procs is its
// process limit (0: none of its own).
func (s *cgroupSet) create(name string, procs int) (*cgroup, error) {
	c := &cgroup{set: s}
	if s.pids {
		c.shared = keyed(readFile(filepath.Join(s.pidsDir, "pids.events")), "max")
	}
	if s.pidsDir != "" {
		c.pidsDir = filepath.Join(s.pidsDir, name)
		if err := os.Mkdir(c.pidsDir, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
	}
	if s.memDir != "" {
		c.memDir = filepath.Join(s.memDir, name)
		if err := os.Mkdir(c.memDir, 0o755); err != nil {
			c.remove() //nolint:errcheck // the create error matters
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
	}
	if err := c.setLimits(procs); err != nil {
		c.remove() //nolint:errcheck // the limit error matters
		return nil, err
	}
	return c, nil
}

func (c *cgroup) setLimits(procs int) error {
	l, s := c.set.limits, c.set
	var writes [][2]string
	if s.pids && procs > 0 {
		writes = append(writes, [2]string{filepath.Join(c.pidsDir, "pids.max"), strconv.Itoa(procs)})
	}
	if s.memory && l.Memory > 0 {
		m := strconv.FormatInt(l.Memory, 10)
		if s.v2 {
			writes = append(writes, [2]string{filepath.Join(c.pidsDir, "memory.max"), m})
			if exists(filepath.Join(c.pidsDir, "memory.swap.max")) {
				writes = append(writes, [2]string{filepath.Join(c.pidsDir, "memory.swap.max"), "0"})
			}
		} else {
			writes = append(writes, [2]string{filepath.Join(c.memDir, "memory.limit_in_bytes"), m})
			if exists(filepath.Join(c.memDir, "memory.memsw.limit_in_bytes")) {
				writes = append(writes, [2]string{filepath.Join(c.memDir, "memory.memsw.limit_in_bytes"), m})
			}
		}
	}
	for _, w := range writes {
		if err := os.WriteFile(w[0], []byte(w[1]), 0); err != nil {
			return fmt.Errorf("set cgroup limit %s: %w", filepath.Base(w[0]), err)
		}
	}
	return nil
}

// dirs returns the cgroup directories the launcher joins.
func (c *cgroup) dirs() []string {
	var out []string
	for _, d := range []string{c.pidsDir, c.memDir} {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

// kill SIGKILLs every process in the cgroup: cgroup.kill in v2, else
// rounds of SIGKILL over cgroup.procs until it is empty (the process
// limit bounds how many can be forked meanwhile).
func (c *cgroup) kill() {
	dir := c.dirs()[0]
	if c.set.v2 && exists(filepath.Join(dir, "cgroup.kill")) {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err == nil {
			c.waitEmpty(dir, false)
			return
		}
	}
	c.waitEmpty(dir, true)
}

// waitEmpty waits (up to about 5 s) until dir has no processes, killing
// them when kill is set.
func (c *cgroup) waitEmpty(dir string, kill bool) {
	for i := 0; i < 1000; i++ {
		pids := strings.Fields(readFile(filepath.Join(dir, "cgroup.procs")))
		if len(pids) == 0 {
			return
		}
		if kill {
			for _, p := range pids {
				if pid, err := strconv.Atoi(p); err == nil && pid > 0 {
					syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // it may be gone
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.set.log.Warn("jail: cgroup still has processes after kill", "cgroup", dir)
}

// events reads which limits were hit. A fork the call's own limit refused
// counts in its pids.events; one the tools' budget refused counts there
// too in cgroup v1, and in v2 in its pids.events.local (Linux 6.13) or
// else only in the tools' pids.events, whose count since the call began
// is then taken.
func (c *cgroup) events() Events {
	var ev Events
	if c.set.pids {
		ev.ForkFailures = max(keyed(readFile(filepath.Join(c.pidsDir, "pids.events")), "max"),
			keyed(readFile(filepath.Join(c.pidsDir, "pids.events.local")), "max"))
		if ev.ForkFailures == 0 && c.set.v2 {
			ev.ForkFailures = max(keyed(readFile(filepath.Join(c.set.pidsDir, "pids.events")), "max")-c.shared, 0)
		}
	}
	if c.set.memory {
		if c.set.v2 {
			ev.OOMKills = keyed(readFile(filepath.Join(c.pidsDir, "memory.events")), "oom_kill")
		} else {
			ev.OOMKills = keyed(readFile(filepath.Join(c.memDir, "memory.oom_control")), "oom_kill")
		}
	}
	return ev
}

// remove deletes the (empty) cgroup directories.
func (c *cgroup) remove() error {
	var errs []error
	for _, d := range c.dirs() {
		var err error
		for i := 0; i < 100; i++ {
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sweep kills and removes the call cgroups of pibot processes that are
// gone (a crash leaves them behind).
func (s *cgroupSet) sweep() {
	for _, parent := range []string{s.pidsDir, s.memDir} {
		if parent == "" {
			continue
		}
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			owner, _, ok := strings.Cut(strings.TrimPrefix(e.Name(), "p"), "-")
			pid, err := strconv.Atoi(owner)
			if !e.IsDir() || !ok || err != nil || !strings.HasPrefix(e.Name(), "p") || alive(pid) {
				continue
			}
			c := &cgroup{set: s, pidsDir: filepath.Join(parent, e.Name())}
			c.kill()
			if err := c.remove(); err != nil {
				s.log.Warn("jail: remove stale cgroup", "err", err)
			}
		}
	}
}

// ownCgroups parses /proc/self/cgroup: controller ("" for v2) to path.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func words(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(s) {
		out[w] = true
	}
	return out
}

// keyed returns the number after key in a "key value" per line file.
func keyed(s, key string) int {
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
