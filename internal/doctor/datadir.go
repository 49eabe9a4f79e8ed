package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// MinFree is the free space below which the data directory fails: sessions,
// the inbox and pairing state need room to append.
const MinFree = 100 << 20

// DataDir checks that dir exists (or can be created), is a directory pibot
// can write and fsync a file in, is not readable by others, and has at
// least minFree bytes free. key is the configuration key to fix.
func DataDir(name, dir, key string, minFree uint64) Check {
	return Check{Name: name, Run: func(context.Context) Finding {
		st, err := os.Stat(dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			parent := existingParent(dir)
			if err := writable(parent); err != nil {
				return failf(name, "create "+dir+" for the user pibot runs as, or change "+key,
					"%s does not exist and %s is not writable: %v", dir, parent, err)
			}
			return okf(name, "%s will be created (in %s, %s free)", dir, parent, freeText(parent))
		case err != nil:
			return failf(name, "fix the path or its permissions, or change "+key, "%v", err)
		case !st.IsDir():
			return failf(name, "point "+key+" at a directory", "%s is not a directory", dir)
		}
		if err := writable(dir); err != nil {
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
				return failf(name, "free space on its file system or move "+key, "%s is full: %v", dir, err)
			}
			return failf(name, "give the user pibot runs as write access (chown) or change "+key, "%s is not writable: %v", dir, err)
		}
		free, err := freeBytes(dir)
		if err == nil && free < minFree {
			return failf(name, "free space on its file system or move "+key, "%s has only %s free (pibot wants at least %s)",
				dir, size(free), size(minFree))
		}
		if st.Mode().Perm()&0o007 != 0 {
			return Finding{Check: name, Status: Warn, Detail: fmt.Sprintf("%s is open to other users (mode %04o)", dir, st.Mode().Perm()),
				Fix: "chmod o-rwx " + dir}
		}
		return okf(name, "%s writable, %s free", dir, freeText(dir))
	}}
}

// existingParent is the nearest existing ancestor of dir.
func existingParent(dir string) string {
	p := filepath.Clean(dir)
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

// writable writes, syncs and removes a probe file in dir.
func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".pibot-doctor-*")
	if err != nil {
		return err
	}
	name := f.Name()
	defer os.Remove(name)
	_, err = f.Write(make([]byte, 4096))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// freeBytes is the space available to an unprivileged user.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil //nolint:unconvert // field types differ by platform
}

func freeText(dir string) string {
	free, err := freeBytes(dir)
	if err != nil {
		return "unknown space"
	}
	return size(free)
}

// size formats a byte count.
func size(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n/1024)
}
