package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limits are the resource limits of one bash call and what the tools
// may write (agent.limits). Zero disables a limit.
type Limits struct {
	// Processes caps processes and threads of one call.
	Processes int `yaml:"processes"`
	// Memory caps the memory of one call.
	Memory Size `yaml:"memory"`
	// CPUTime caps the CPU time of every process of a call.
	CPUTime Duration `yaml:"cpu_time"`
	// FileSize caps the size of every file a call writes (bash, write
	// and edit).
	FileSize Size `yaml:"file_size"`
	// WorkspaceSize caps what the workspace holds: write and edit refuse
	// to grow a file past it, and a bash call that starts over it runs
	// with file writes blocked.
	WorkspaceSize Size `yaml:"workspace_size"`
	// DiskReserve is the free space kept on the file systems of the
	// workspace and data_dir: the tools do not write into it.
	DiskReserve Size `yaml:"disk_reserve"`
	// Output caps the full output of one call kept on disk.
	Output Size `yaml:"output"`
	// User runs tools as this user (name or uid[:gid]) when pibot runs
	// as root; empty keeps pibot's user.
	User string `yaml:"user"`
}

// DefaultLimits are limits that suit a coding agent: builds and test
// suites fit, fork bombs and runaway allocations do not.
func DefaultLimits() Limits {
	return Limits{
		Processes: 1024,
		Memory:    2 << 30,
		CPUTime:   Duration(10 * time.Minute),
		FileSize:  1 << 30,
		Output:    64 << 20,
		// A workspace for code, builds and dependencies; the reserve
		// keeps a shared file system writable for sessions and the inbox.
		WorkspaceSize: 10 << 30,
		DiskReserve:   1 << 30,
	}
}

// minMemory is the smallest useful memory limit.
const minMemory = 16 << 20

func (l Limits) validate(bad func(key, format string, args ...any)) {
	if l.Processes < 0 {
		bad("agent.limits.processes", "must not be negative (0: no limit)")
	} else if l.Processes > 0 && l.Processes < 8 {
		bad("agent.limits.processes", "%d is too few for a shell pipeline (at least 8, or 0 for no limit)", l.Processes)
	}
	if l.Memory < 0 {
		bad("agent.limits.memory", "must not be negative (0: no limit)")
	} else if l.Memory > 0 && l.Memory < minMemory {
		bad("agent.limits.memory", "%s is too little to run a shell (at least 16MiB, or 0 for no limit)", l.Memory)
	}
	if l.CPUTime < 0 {
		bad("agent.limits.cpu_time", "must not be negative (0: no limit)")
	} else if l.CPUTime > 0 && l.CPUTime.D() < time.Second {
		bad("agent.limits.cpu_time", "%s is less than the 1s granularity (0: no limit)", l.CPUTime.D())
	}
	if l.FileSize < 0 {
		bad("agent.limits.file_size", "must not be negative (0: no limit)")
	}
	if l.Output < 0 {
		bad("agent.limits.output", "must not be negative (0: no limit)")
	}
	if l.WorkspaceSize < 0 {
		bad("agent.limits.workspace_size", "must not be negative (0: no quota)")
	}
	if l.DiskReserve < 0 {
		bad("agent.limits.disk_reserve", "must not be negative (0: no reserve)")
	}
}

// Size is a number of bytes written as 2GiB, 512MiB, 100MB, 64K or a
// plain number.
type Size int64

// sizeUnits maps suffixes (lower case) to multipliers.
func sizeUnits() map[string]int64 {
	return map[string]int64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1000,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1000 * 1000,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1000 * 1000 * 1000,
		"t": 1 << 40, "tib": 1 << 40, "tb": 1000 * 1000 * 1000 * 1000,
	}
}

// ParseSize reads a size such as "2GiB" or "0".
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits()[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("%q is not a size (e.g. 2GiB, 512MiB, 100MB, 0)", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("%q is not a size (e.g. 2GiB, 512MiB, 100MB, 0)", s)
	}
	return Size(f * float64(mult)), nil
}

// UnmarshalYAML reads a size.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	var v string
	if err := n.Decode(&v); err != nil {
		return err
	}
	p, err := ParseSize(v)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = p
	return nil
}

// MarshalYAML writes the size in the largest exact binary unit.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// String renders the size in the largest exact binary unit ("2GiB").
func (s Size) String() string {
	n := int64(s)
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
