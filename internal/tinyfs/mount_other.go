//go:build !linux

package tinyfs

import "testing"

// Mount skips the test: mounting a small tmpfs needs Linux.
func Mount(t testing.TB, _ int64) string {
	t.Helper()
	t.Skip("tinyfs: mounting a small tmpfs needs Linux; skipped")
	return ""
}
