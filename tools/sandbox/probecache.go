package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pibot/pibot/internal/atomicfile"
)

// probeSysctls are the kernel settings that decide whether an unprivileged
// process may create the user namespaces bwrap needs (Debian's switch, the
// namespace limit, Ubuntu's AppArmor restriction). A missing one is part
// of the key too.
var probeSysctls = [...]string{
	"/proc/sys/kernel/unprivileged_userns_clone",
	"/proc/sys/user/max_user_namespaces",
	"/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
}

// ProbeCache remembers a successful probe of bwrap in File, so a process
// that starts often (`pibot chat -p`) does not start a sandbox only to
// learn that sandboxes start. The entry is keyed by the bwrap binary's
// path, modification time and size, the kernel settings above, the
// effective user and the sandbox's layout: when any of them changes, the
// probe runs again. Only success is remembered (a failure is probed again
// next time), so the cache can never be the reason a command runs
// unsandboxed; and a sandbox decided from the cache that then fails to
// start says so (Sandbox.Recheck).
type ProbeCache struct {
	// File holds the entry; "" disables the cache.
	File string
	// Probe is the real probe (ProbeBwrap when nil).
	Probe Probe
}

// probeEntry is File's content.
type probeEntry struct {
	Key string `json:"key"`
	OK  bool   `json:"ok"`
}

// Cached is the cached probe: nil at once when File holds a success for
// path under the current key; otherwise the real probe, whose success is
// written to File (an unreadable, corrupt or stale File is probed again
// and replaced). fromCache reports which of the two answered.
func (c ProbeCache) Cached(ctx context.Context, path string) (fromCache bool, err error) {
	key, kerr := probeKey(path)
	if kerr == nil && c.File != "" {
		if b, rerr := os.ReadFile(c.File); rerr == nil {
			var e probeEntry
			if json.Unmarshal(b, &e) == nil && e.OK && e.Key == key {
				return true, nil
			}
		}
	}
	if err := c.real(ctx, path); err != nil {
		c.forget()
		return false, err
	}
	if kerr == nil && c.File != "" {
		// A cache that cannot be written costs the next start a probe.
		if b, merr := json.Marshal(probeEntry{Key: key, OK: true}); merr == nil {
			if os.MkdirAll(filepath.Dir(c.File), 0o700) == nil {
				_ = atomicfile.Write(c.File, b)
			}
		}
	}
	return false, nil
}

// Recheck runs the real probe; on failure it removes the cached entry.
func (c ProbeCache) Recheck(ctx context.Context, path string) error {
	if err := c.real(ctx, path); err != nil {
		c.forget()
		return err
	}
	return nil
}

func (c ProbeCache) real(ctx context.Context, path string) error {
	if c.Probe != nil {
		return c.Probe(ctx, path)
	}
	return ProbeBwrap(ctx, path)
}

func (c ProbeCache) forget() {
	if c.File != "" {
		_ = os.Remove(c.File)
	}
}

// probeKey identifies what a probe of the bwrap at path depends on.
func probeKey(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("sandbox: stat bwrap: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "bwrap %s %d %d\nuid %d\n", path, fi.ModTime().UnixNano(), fi.Size(), os.Geteuid())
	for _, s := range probeSysctls {
		v, err := os.ReadFile(s)
		if err != nil {
			v = []byte("-")
		}
		fmt.Fprintf(h, "%s=%s\n", s, strings.TrimSpace(string(v)))
	}
	fmt.Fprintf(h, "layout %q\n", Args(Layout{Workspace: "/"}))
	return hex.EncodeToString(h.Sum(nil)), nil
}
