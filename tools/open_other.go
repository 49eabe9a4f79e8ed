//go:build !linux

package tools

import "os"

// openNoMagic opens path like os.OpenFile (magic links are a Linux
// thing).
func openNoMagic(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag, perm)
}

// kernelFile reports false: resolve refuses /proc, /sys and /dev by path.
func kernelFile(*os.File) bool { return false }

// openedPath is not known without /proc/self/fd.
func openedPath(*os.File) (string, bool) { return "", false }

// kernelDir reports false: resolve refuses /proc, /sys and /dev by path.
func kernelDir(string) bool { return false }
