package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pibot/pibot/tools/sandbox"
)

// fakeBwrapScript runs the command after "--" as bwrap would, or, once a
// file named broken sits beside it, fails as bwrap does where user
// namespaces are not allowed.
const fakeBwrapScript = `#!/bin/sh
if [ -e "$(dirname "$0")/broken" ]; then
  echo "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces" >&2
  exit 1
fi
while [ "$1" != "--" ]; do shift; done
shift
exec "$@"
`

// A sandbox decided from a probe cache that said yes, on a host where
// bwrap now fails: the bash call is an error that says so (and the next
// start probes again), not the command's silent failure. A command that
// merely prints what bwrap prints is left alone.
func TestBashSandboxCacheStale(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(bin, []byte(fakeBwrapScript), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	file := filepath.Join(t.TempDir(), "sandbox-probe.json")
	yes := func(context.Context, string) error { return nil }
	if _, err := (sandbox.ProbeCache{File: file, Probe: yes}).Cached(t.Context(), bin); err != nil {
		t.Fatal(err)
	}
	newSet := func() *Set {
		s, err := New(t.Context(), Options{Workspace: t.TempDir(), TempDir: t.TempDir(), Sandbox: sandbox.ModeAuto, SandboxCache: file})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	run := func(s *Set, command string) error {
		args, _ := json.Marshal(map[string]string{"command": command})
		_, err := s.Get("bash").Execute(t.Context(), "c", args, nil)
		return err
	}

	s := newSet()
	err := run(s, "echo 'bwrap: looks like an error'; exit 1")
	if err == nil || !strings.Contains(err.Error(), "bwrap: looks like an error") || strings.Contains(err.Error(), "Cannot start the sandbox") {
		t.Fatalf("a command printing bwrap's prefix: %v", err)
	}

	if err := os.WriteFile(filepath.Join(dir, "broken"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = run(s, "echo hello")
	if err == nil || !strings.Contains(err.Error(), "Cannot start the sandbox") || !strings.Contains(err.Error(), "No permissions to create new namespace") {
		t.Fatalf("stale cache: %v", err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("cache entry kept: %v", err)
	}
	if next := newSet(); !strings.Contains(next.SandboxStatus(), "sandbox unavailable") {
		t.Errorf("next start: %q", next.SandboxStatus())
	}
}
