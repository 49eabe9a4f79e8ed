package deploy

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDarwinBuilds cross-compiles the module for macOS: go vet type-checks
// every package, tests included, and the binary is linked. The Linux-only
// system calls (fdatasync, prctl, capabilities, cgroups, PID namespaces,
// tmpfs mounts) stay behind build tags with macOS versions beside them.
//
// Only darwin/arm64: darwin/amd64 differs in no file of pibot's own, only
// in golang.org/x/sys's architecture files, and compiling every dependency
// once more for it made this test take half an hour on a loaded 2-core
// machine, past scripts/test's per-package limit. scripts/release still
// builds darwin/amd64.
func TestDarwinBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the module for macOS: scripts/test --all")
	}
	needTools(t, "go")
	for _, args := range [][]string{{"vet", "./..."}, {"build", "-o", os.DevNull, "./cmd/pibot"}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=darwin GOARCH=arm64 go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
}
