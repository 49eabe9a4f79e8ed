package deploy

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDarwinBuilds cross-compiles the whole module, tests included (go
// vet type-checks test files), for macOS: the Linux-only system calls
// (fdatasync, prctl, capabilities, cgroups, PID namespaces, tmpfs
// mounts) stay behind build tags with macOS versions beside them.
func TestDarwinBuilds(t *testing.T) {
	needTools(t, "go")
	for _, arch := range []string{"arm64", "amd64"} {
		for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
			if arch == "amd64" && args[0] == "vet" {
				continue // one vet run covers the build tags; amd64 only builds
			}
			cmd := exec.Command("go", args...)
			cmd.Dir = ".."
			cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH="+arch, "CGO_ENABLED=0")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("GOOS=darwin GOARCH=%s go %s: %v\n%s", arch, strings.Join(args, " "), err, b)
			}
		}
	}
}
