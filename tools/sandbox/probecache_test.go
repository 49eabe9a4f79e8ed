package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// countingProbe counts real probes and answers with *err.
func countingProbe(n *int, err *error) Probe {
	return func(context.Context, string) error {
		*n++
		return *err
	}
}

// The cache answers a second start without a probe, and probes again
// whenever what the answer depended on changed or the file cannot be
// trusted; a failure is never remembered.
func TestProbeCache(t *testing.T) {
	cases := []struct {
		name  string
		spoil func(t *testing.T, bin, file string) // between the first and second probe
		want  int                                  // real probes in all
	}{
		{"unchanged: answered from the cache", func(*testing.T, string, string) {}, 1},
		{"bwrap rewritten (size): probe again", func(t *testing.T, bin, _ string) {
			write(t, bin, "#!/bin/sh\n# upgraded\nexit 0\n")
		}, 2},
		{"bwrap touched (mtime): probe again", func(t *testing.T, bin, _ string) {
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(bin, later, later); err != nil {
				t.Fatal(err)
			}
		}, 2},
		{"corrupt cache: probe again", func(t *testing.T, _, file string) { write(t, file, "{not json") }, 2},
		{"entry of another binary: probe again", func(t *testing.T, _, file string) {
			write(t, file, `{"key":"0000","ok":true}`)
		}, 2},
		{"unreadable cache: probe again", func(t *testing.T, _, file string) {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(file, 0o700); err != nil { // reading a directory fails
				t.Fatal(err)
			}
		}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bin := fakeBwrap(t)
			file := filepath.Join(t.TempDir(), "sub", "sandbox-probe.json")
			var n int
			var perr error
			cache := ProbeCache{File: file, Probe: countingProbe(&n, &perr)}
			if fc, err := cache.Cached(t.Context(), bin); err != nil || fc {
				t.Fatalf("first: fromCache=%v err=%v", fc, err)
			}
			c.spoil(t, bin, file)
			fc, err := cache.Cached(t.Context(), bin)
			if err != nil {
				t.Fatal(err)
			}
			if n != c.want || fc != (c.want == 1) {
				t.Errorf("probes = %d (want %d), fromCache = %v", n, c.want, fc)
			}
		})
	}

	t.Run("a failure is not remembered and clears the entry", func(t *testing.T) {
		bin := fakeBwrap(t)
		file := filepath.Join(t.TempDir(), "sandbox-probe.json")
		var n int
		var perr error
		cache := ProbeCache{File: file, Probe: countingProbe(&n, &perr)}
		if _, err := cache.Cached(t.Context(), bin); err != nil {
			t.Fatal(err)
		}
		perr = errors.New("setting up uid map: Permission denied")
		if err := cache.Recheck(t.Context(), bin); err == nil {
			t.Fatal("Recheck hid a failing probe")
		}
		if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("entry kept after a failed probe: %v", err)
		}
		for range 2 {
			if fc, err := cache.Cached(t.Context(), bin); err == nil || fc {
				t.Errorf("fromCache=%v err=%v, want the probe's failure", fc, err)
			}
		}
		if n != 4 {
			t.Errorf("probes = %d, want 4 (every failure probed again)", n)
		}
	})
}

// A sandbox decided from the cache whose bwrap no longer works reports
// that, and clearly, when asked after a failed command; one decided by a
// real probe in this process is not probed again.
func TestStartCachedRecheck(t *testing.T) {
	bin := fakeBwrap(t)
	file := filepath.Join(t.TempDir(), "sandbox-probe.json")
	var n int
	var perr error
	cache := ProbeCache{File: file, Probe: countingProbe(&n, &perr)}

	first, err := StartCached(t.Context(), ModeBwrap, nil, bin, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Recheck(t.Context()); err != nil || n != 1 {
		t.Fatalf("probed this process: Recheck = %v after %d probes, want nil after 1", err, n)
	}

	second, err := StartCached(t.Context(), ModeAuto, nil, bin, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Active() || n != 1 {
		t.Fatalf("active=%v after %d probes, want the cache's answer", second.Active(), n)
	}
	perr = errors.New("No permissions to create new namespace")
	err = second.Recheck(t.Context())
	if err == nil || !strings.Contains(err.Error(), "cannot create a sandbox any more") || !strings.Contains(err.Error(), "No permissions") {
		t.Fatalf("Recheck = %v", err)
	}
	third, err := StartCached(t.Context(), ModeAuto, nil, bin, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if third.Active() {
		t.Error("the next start trusted the cache after the failure")
	}
	if _, err := StartCached(t.Context(), ModeBwrap, nil, bin, cache, nil); err == nil {
		t.Error("mode bwrap started on a bwrap that fails")
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
}
