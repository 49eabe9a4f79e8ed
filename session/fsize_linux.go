package session

import (
	"os"

	"golang.org/x/sys/unix"
)

// fileSize is f's size from fstat, without os.File.Stat's FileInfo on the
// heap: the writer checks it before every write (the other-writer check).
func fileSize(f *os.File) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	return st.Size, nil
}

// FileID is the file's device and inode.
func (r rangeFile) FileID() (dev, ino uint64, ok bool) {
	var st unix.Stat_t
	if err := unix.Fstat(int(r.f.Fd()), &st); err != nil {
		return 0, 0, false
	}
	return uint64(st.Dev), st.Ino, true // Dev is not a uint64 on every architecture
}
