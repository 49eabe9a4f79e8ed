package fsync

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data and size to disk (fdatasync: an append-only
// file needs those, not its timestamps).
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
