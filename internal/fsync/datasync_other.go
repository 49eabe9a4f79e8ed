//go:build !linux

package fsync

import "os"

// datasync flushes f to disk. Without fdatasync (macOS) it is a full
// fsync, which on macOS Go also asks the drive to flush (F_FULLFSYNC).
func datasync(f *os.File) error { return f.Sync() }
