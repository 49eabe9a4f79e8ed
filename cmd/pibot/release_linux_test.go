package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFileKB reads RssFile of this process.
func rssFileKB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestReleaseStartupPages: the test binary's own file pages are dropped
// and the code keeps running (its pages fault back in).
func TestReleaseStartupPages(t *testing.T) {
	before := rssFileKB(t)
	releaseStartupPages()
	after := rssFileKB(t)
	if after >= before {
		t.Fatalf("RssFile %d kB -> %d kB, want less", before, after)
	}
	// Code, constants and function tables still work after the drop.
	if s := strings.Repeat("ab", 3); s != "ababab" {
		t.Fatal(s)
	}
	t.Logf("RssFile %d kB -> %d kB", before, after)
}

func TestCleanExeMappings(t *testing.T) {
	smaps := `00400000-013f2000 r-xp 00000000 fe:00 9994356                            /bin/pibot
Size:              16328 kB
Rss:                9604 kB
Anonymous:             0 kB
013f2000-028c2000 r--p 00ff2000 fe:00 9994356                            /bin/pibot
Anonymous:             8 kB
028c2000-02935000 rw-p 024c2000 fe:00 9994356                            /bin/pibot
Anonymous:           300 kB
02935000-0497b000 rw-p 00000000 00:00 0
Anonymous:           176 kB
7f00000000-7f00001000 r--p 00000000 fe:00 1234                            /lib/other.so
Anonymous:             0 kB
7f00002000-7f00003000 r--p 00000000 fe:00 9994356                            /bin/pibot
Anonymous:             0 kB
`
	got := cleanExeMappings([]byte(smaps), "/bin/pibot")
	want := [][2]uintptr{{0x400000, 0x13f2000}, {0x7f00002000, 0x7f00003000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %x, want %x (the copied r--p mapping, the writable one and other files left alone)", got, want)
	}
}
