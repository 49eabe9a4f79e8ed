//go:build !linux

package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// launch applies the rlimits of the spec and executes argv; it returns
// only on error. Cgroups, capabilities and user switches need Linux: a
// spec asking for them is refused rather than ignored.
func launch(specJSON string, argv []string) error {
	runtime.LockOSThread()
	var s spec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		return fmt.Errorf("bad spec: %w", err)
	}
	if len(s.Cgroups) > 0 || s.DropCaps || s.UID != nil {
		return errors.New("cgroups, capabilities and user switches need Linux")
	}
	for _, r := range s.Rlimits {
		res, ok := map[string]int{rlimitDATA: unix.RLIMIT_DATA,
			rlimitCPU: unix.RLIMIT_CPU, rlimitFSIZE: unix.RLIMIT_FSIZE}[r.Res]
		if !ok {
			return fmt.Errorf("unsupported rlimit %q", r.Res)
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: r.Cur, Max: r.Max}); err != nil {
			return fmt.Errorf("set rlimit %s: %w", r.Res, err)
		}
	}
	path := argv[0]
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return err
		}
		path = p
	}
	return fmt.Errorf("exec %s: %w", argv[0], unix.Exec(path, argv, os.Environ()))
}
