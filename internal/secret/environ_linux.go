package secret

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ScrubEnviron removes the named variables from the process environment
// for good: os.Unsetenv drops them from Go's copy, and their values are
// overwritten with NUL bytes in the initial environment block the kernel
// shows in /proc/PID/environ (which os.Unsetenv never touches). Call it
// before any other goroutine reads the environment.
func ScrubEnviron(names []string) error {
	if len(names) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
		os.Unsetenv(n) //nolint:errcheck // cannot fail for a valid name
	}
	start, end, err := envBlock()
	if err != nil {
		return fmt.Errorf("secret: scrub environment: %w", err)
	}
	// /proc/self/mem of a non-dumpable process belongs to root: allow
	// this process to open its own memory for the moment it takes.
	dumpable, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if dumpable != 1 {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err == nil {
			defer unix.Prctl(unix.PR_SET_DUMPABLE, uintptr(dumpable), 0, 0, 0) //nolint:errcheck // restoring
		}
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("secret: scrub environment: %w", err)
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, int64(start)); err != nil {
		return fmt.Errorf("secret: scrub environment: read: %w", err)
	}
	off := 0
	for _, entry := range bytes.Split(block, []byte{0}) {
		name, value, ok := bytes.Cut(entry, []byte("="))
		if ok && want[string(name)] && len(value) > 0 {
			at := start + uint64(off+len(name)+1)
			if _, err := mem.WriteAt(make([]byte, len(value)), int64(at)); err != nil {
				return fmt.Errorf("secret: scrub environment: write: %w", err)
			}
		}
		off += len(entry) + 1
	}
	return nil
}

// envBlock returns the bounds of the initial environment block: fields
// 50 and 51 (env_start, env_end) of /proc/self/stat.
func envBlock() (start, end uint64, err error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces; count from its ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("unexpected /proc/self/stat")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 49 {
		return 0, 0, errors.New("/proc/self/stat lacks env_start and env_end")
	}
	if start, err = strconv.ParseUint(f[47], 10, 64); err != nil {
		return 0, 0, err
	}
	if end, err = strconv.ParseUint(f[48], 10, 64); err != nil {
		return 0, 0, err
	}
	if end <= start {
		return 0, 0, errors.New("empty environment block")
	}
	return start, end, nil
}
