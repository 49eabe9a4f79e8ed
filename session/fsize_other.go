//go:build !linux

package session

import "os"

// fileSize is f's size.
func fileSize(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// FileID is the file's device and inode: unknown here.
func (rangeFile) FileID() (dev, ino uint64, ok bool) { return 0, 0, false }
