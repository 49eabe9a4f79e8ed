package tinyfs

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size bytes on a new temporary directory and
// unmounts it when the test ends. It skips the test when the process may
// not mount (not root, or no mount permission in this container).
func Mount(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("tinyfs: mounting a small tmpfs needs root; skipped")
	}
	dir := filepath.Join(t.TempDir(), "tinyfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)+",mode=0700"); err != nil {
		t.Skipf("tinyfs: cannot mount a tmpfs here (%v); skipped", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("tinyfs: unmount %s: %v", dir, err)
		}
	})
	return dir
}
