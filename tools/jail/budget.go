package jail

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The process budget of the tools. pibot's own cgroup, or one above it,
// may cap the tasks pibot's subtree holds (systemd's TasksMax, docker
// --pids-limit, a Kubernetes pid limit). A tool must never take the last
// of them: pibot would fail to start a thread and die. So all calls
// together get what the caps leave beside pibot (and whatever else runs in
// its cgroup), less a reserve kept free for pibot. With cgroups that is
// pids.max of pibot-tools, the parent of every call's cgroup, set again
// before each call; without, RLIMIT_NPROC (see Jail.Command).

// Budget is what the host leaves the tool calls.
type Budget struct {
	// Host is how many tasks pibot's cgroup may hold in all: its
	// pids.max, or less when an ancestor's leaves less room (counting
	// what runs there beside pibot). 0 when nothing caps it.
	Host int
	// Reserve is kept free for pibot's own threads and processes.
	Reserve int
	// Tools is how many processes and threads all calls together may
	// run.
	Tools int
}

// Reserve is how many tasks are kept free for pibot under a cap of host
// tasks: a quarter of it, at least 32 and at most 256. pibot itself runs
// some 10 to 40 threads; the rest is for its hooks, MCP servers and the
// threads it starts while the tools use their whole budget.
func Reserve(host int) int { return min(max(host/4, 32), 256) }

// pidsCap reads the pids limits over pibot's subtree: of a cgroup and
// its ancestors up to the hierarchy's mount point.
type pidsCap struct {
	dir  string // the cgroup that holds pibot and the tools' cgroup
	root string // the mount point of the hierarchy, where the walk ends
}

// room returns how many more tasks the subtree of c.dir may hold now
// (the least pids.max - pids.current over c.dir and its ancestors that
// have a limit) and how many it may hold in all (what it holds plus
// room). ok is false when no level has a limit.
func (c pidsCap) room() (room, total int, ok bool) {
	for d := c.dir; ; d = filepath.Dir(d) {
		if m, limited := readCount(filepath.Join(d, "pids.max")); limited {
			cur, _ := readCount(filepath.Join(d, "pids.current"))
			if r := m - cur; !ok || r < room {
				room, ok = r, true
			}
		}
		if d == c.root || !strings.HasPrefix(d, c.root+"/") {
			break
		}
	}
	own, _ := readCount(filepath.Join(c.dir, "pids.current"))
	return max(room, 0), max(own+room, 0), ok
}

// budget is what the caps leave the tools, of which inUse tasks already
// run (pids.current of the tools' cgroup; 0 without one). ok is false
// when nothing caps pibot.
func (c pidsCap) budget(inUse int) (b Budget, ok bool) {
	room, total, ok := c.room()
	if !ok {
		return Budget{}, false
	}
	r := Reserve(total)
	return Budget{Host: total, Reserve: r, Tools: max(inUse+room-r, 0)}, true
}

// hostCap finds the pids cgroup pibot runs in, to be read only: the
// unified hierarchy at fs when it is mounted there, else the v1 pids
// hierarchy at fs/pids. Behind a cgroup namespace or in a container whose
// mount shows pibot's cgroup as the root, the path /proc/self/cgroup
// names may not exist below the mount: the mount point is then pibot's
// cgroup.
func hostCap(fs string) (pidsCap, bool) {
	own, err := ownCgroups()
	if err != nil {
		return pidsCap{}, false
	}
	root, ctl := filepath.Join(fs, "pids"), "pids"
	if exists(filepath.Join(fs, "cgroup.controllers")) {
		root, ctl = fs, ""
	}
	p, ok := own[ctl]
	if !ok || !exists(root) {
		return pidsCap{}, false
	}
	dir := filepath.Join(root, p)
	if !exists(dir) {
		dir = root
	}
	return pidsCap{dir: dir, root: root}, true
}

// readCount reads a number from a cgroup file; ok is false when the file
// is missing or says "max".
func readCount(path string) (n int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err = strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}
