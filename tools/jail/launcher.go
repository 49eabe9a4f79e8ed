package jail

import (
	"encoding/json"
	"fmt"
	"os"
)

// Resource names in a spec.
const (
	rlimitNPROC = "nproc"
	rlimitDATA  = "data"
	rlimitCPU   = "cpu"
	rlimitFSIZE = "fsize"
)

// rlimit is one resource limit for the launcher to set.
type rlimit struct {
	Res string `json:"res"`
	Cur uint64 `json:"cur"`
	Max uint64 `json:"max"`
}

// spec is what the launcher does before it executes the target; it is
// passed as the argument after LauncherArg.
type spec struct {
	Cgroups  []string `json:"cgroups,omitempty"`
	Rlimits  []rlimit `json:"rlimits,omitempty"`
	DropCaps bool     `json:"dropCaps,omitempty"`
	UID      *int     `json:"uid,omitempty"`
	GID      *int     `json:"gid,omitempty"`
	Groups   []int    `json:"groups,omitempty"`
}

func (s spec) encode() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("jail: encode spec: %w", err)
	}
	return string(b), nil
}

// Main turns the process into a launcher when its first argument is
// LauncherArg: it applies the spec and executes the target, or exits
// with status 126 and a message on stderr. Otherwise it returns at once.
// Call it first thing in main() and in TestMain of tests that run
// commands through a Jail.
func Main() {
	if len(os.Args) < 2 || os.Args[1] != LauncherArg {
		return
	}
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "pibot: jail: launcher needs a spec and a command")
		os.Exit(126)
	}
	err := launch(os.Args[2], os.Args[3:])
	fmt.Fprintln(os.Stderr, "pibot: jail:", err)
	os.Exit(126)
}
