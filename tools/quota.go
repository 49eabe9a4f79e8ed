package tools

import (
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/pibot/pibot/tools/jail"
)

// Quota bounds what the tools may write (config agent.limits). Zero
// disables a bound.
type Quota struct {
	// FileSize is the largest file write and edit may leave (bash has
	// the same bound per file as RLIMIT_FSIZE, from its jail).
	FileSize int64
	// WorkspaceSize is the most the workspace may hold (disk usage of
	// every file in it). write and edit refuse to grow a file past it;
	// a bash call that starts while the workspace is over it runs with
	// file writes blocked.
	WorkspaceSize int64
	// DiskReserve is the free space kept on the workspace's file system
	// and on those of Guard (pibot's data directory): write and edit
	// refuse to take it, a bash call that starts under it runs with file
	// writes blocked, one that brings free space under it is stopped
	// (checked every 10 ms), and no single file of a call may grow
	// beyond the free space above it.
	DiskReserve int64
	// Guard are directories whose file systems keep DiskReserve free
	// besides the workspace's: pibot's data directory, and /tmp when bash
	// is unsandboxed.
	Guard []string
}

// remeasure is how long a measurement of the workspace is trusted when
// nothing but write and edit (which count what they add) changed it.
const remeasure = time.Minute

// quota keeps a workspace's Quota. It is safe for concurrent use.
type quota struct {
	root string // the workspace's real path
	lim  Quota

	mu       sync.Mutex
	used     int64     // disk usage when measured, plus the growth admitted since
	measured time.Time // zero: unknown (never measured, or a bash call ran since)
}

// measureLocked refreshes used when it is unknown or old.
func (q *quota) measureLocked() {
	if q.lim.WorkspaceSize <= 0 || !q.measured.IsZero() && time.Since(q.measured) < remeasure {
		return
	}
	q.used = diskUsage(q.root)
	q.measured = time.Now()
}

// grow admits a write that changes one file from old to size bytes: it
// refuses (with the text the model sees) when the file would exceed
// FileSize, the workspace WorkspaceSize, or free space would fall under
// DiskReserve. A file that does not grow is always admitted. undo takes
// the growth back when the write then fails.
func (q *quota) grow(old, size int64) (undo func(), err error) {
	if q.lim.FileSize > 0 && size > q.lim.FileSize && size > old {
		return nil, failf("Refused: the file would be %s, over the limit of %s per file (agent.limits.file_size).",
			jail.FormatBytes(size), jail.FormatBytes(q.lim.FileSize))
	}
	delta := size - old
	if delta <= 0 {
		return func() {}, nil
	}
	if q.lim.DiskReserve > 0 {
		if free, ok := q.free(); ok && free-delta < q.lim.DiskReserve {
			return nil, failf("Refused: only %s would be left free on the file system of the workspace or of pibot's data, under the %s kept free for pibot's data (agent.limits.disk_reserve). Delete files in the workspace first.",
				jail.FormatBytes(max(free-delta, 0)), jail.FormatBytes(q.lim.DiskReserve))
		}
	}
	if q.lim.WorkspaceSize <= 0 {
		return func() {}, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.measureLocked()
	if q.used+delta > q.lim.WorkspaceSize {
		return nil, failf("Refused: the workspace would hold %s, over its quota of %s (agent.limits.workspace_size). Delete files in the workspace first.",
			jail.FormatBytes(q.used+delta), jail.FormatBytes(q.lim.WorkspaceSize))
	}
	q.used += delta
	return func() {
		q.mu.Lock()
		q.used -= delta
		q.mu.Unlock()
	}, nil
}

// blocked says why files may not grow now ("" when they may): the
// workspace is over its quota, or free space is under the reserve.
func (q *quota) blocked() string {
	if q.lim.DiskReserve > 0 {
		if free, ok := q.free(); ok && free < q.lim.DiskReserve {
			return "Only " + jail.FormatBytes(max(free, 0)) + " is free on the file system of the workspace or of pibot's data, under the " +
				jail.FormatBytes(q.lim.DiskReserve) + " kept free for pibot's data (agent.limits.disk_reserve)."
		}
	}
	if q.lim.WorkspaceSize <= 0 {
		return ""
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.measureLocked()
	if q.used >= q.lim.WorkspaceSize {
		return "The workspace holds " + jail.FormatBytes(q.used) + ", at its quota of " +
			jail.FormatBytes(q.lim.WorkspaceSize) + " (agent.limits.workspace_size)."
	}
	return ""
}

// lowSpace reports whether free space on the workspace's file system is
// under the reserve.
func (q *quota) lowSpace() bool {
	if q.lim.DiskReserve <= 0 {
		return false
	}
	free, ok := q.free()
	return ok && free < q.lim.DiskReserve
}

// free is the least free space on the file systems the reserve guards.
func (q *quota) free() (int64, bool) {
	least, known := int64(0), false
	for _, d := range append([]string{q.root}, q.lim.Guard...) {
		if f, ok := freeSpace(d); ok && (!known || f < least) {
			least, known = f, true
		}
	}
	return least, known
}

// changed forgets the measurement: something else (a bash call) may have
// written to the workspace.
func (q *quota) changed() {
	q.mu.Lock()
	q.measured = time.Time{}
	q.mu.Unlock()
}

// freeSpace is the space an unprivileged user may still take on the file
// system of dir.
func freeSpace(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true //nolint:unconvert,gosec // field types differ by platform
}

// diskUsage is the space the files below root take on disk (blocks
// allocated, so sparse files count what they use), symlinks not
// followed.
func diskUsage(root string) int64 {
	var n int64
	filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error { //nolint:errcheck // unreadable parts count nothing
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += int64(st.Blocks) * 512 //nolint:unconvert // int32 on some platforms
		} else {
			n += info.Size()
		}
		return nil
	})
	return n
}
