package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ReplicaLock is what a replica of a cluster holds on the data directory
// the replicas share: a shared flock on <dir>/.pibot.lock (so a pibot
// running alone, which takes it exclusively, cannot start beside the
// replicas, nor they beside it) and an exclusive flock on
// <dir>/replicas/<id>.lock (so two processes with one replica identity
// cannot run at once). The kernel drops both when the process dies.
type ReplicaLock struct {
	dir, replica *os.File
}

// ReplicaID derives a replica identity from the host name and the
// address the replica listens on: stable across restarts of the replica
// and different for two replicas on one host. Characters other than
// letters, digits, '.', '-' and '_' become '_', so it names a file.
func ReplicaID(host, listen string) string {
	id := host
	if listen != "" {
		id += "-" + listen
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, id)
}

// LockReplica takes the locks of replica id on dir, creating what it
// needs. It fails with ErrLocked when a pibot running alone holds dir, or
// another process runs as replica id.
func LockReplica(dir, id string) (*ReplicaLock, error) {
	if id == "" || id != ReplicaID(id, "") || id == "." || id == ".." {
		return nil, fmt.Errorf("cluster: replica id %q: want letters, digits, '.', '-', '_'", id)
	}
	if err := os.MkdirAll(filepath.Join(dir, "replicas"), 0o700); err != nil {
		return nil, fmt.Errorf("cluster: data dir: %w", err)
	}
	d, err := flock(filepath.Join(dir, ".pibot.lock"), unix.LOCK_SH)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s is held by a pibot running alone: %w", dir, err)
	}
	r, err := flock(filepath.Join(dir, "replicas", id+".lock"), unix.LOCK_EX)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("cluster: replica %s already runs on %s: %w", id, dir, err)
	}
	_ = r.Truncate(0)
	fmt.Fprintf(r, "%d\n", os.Getpid())
	return &ReplicaLock{dir: d, replica: r}, nil
}

// flock opens path and locks it with how (LOCK_SH or LOCK_EX) without
// waiting; a lock held by another process is ErrLocked.
func flock(path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return f, nil
}

// Unlock releases both locks.
func (l *ReplicaLock) Unlock() error {
	if l == nil || l.dir == nil {
		return nil
	}
	err := errors.Join(l.replica.Close(), l.dir.Close())
	l.dir, l.replica = nil, nil
	return err
}
