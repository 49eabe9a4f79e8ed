package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// releaseStartupPages drops the binary's read-only pages (code, constants,
// function tables) from the process's page tables once start-up is over.
// Start-up runs every package initialiser and builds the gateway, which
// touches code spread over the whole binary, and the kernel maps up to
// 64 KB around each page touched (fault-around): about 21 of the 25 MiB
// of an idle gateway were such pages, of which the idle gateway uses
// about 3. The pages stay in the page cache, so whatever runs later maps
// them again with a minor fault (no disk read). A mapping with any
// private copy in it (a cgo build's relocated, then read-only, tables) is
// left alone: dropping it would lose the relocations. Like
// debug.FreeOSMemory for the heap this is best effort; errors are ignored.
func releaseStartupPages() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return
	}
	for _, r := range cleanExeMappings(smaps, exe) {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_DONTNEED)
	}
}

// cleanExeMappings returns the [start, end) ranges of the read-only
// mappings of exe in smaps that hold no anonymous (copied) page.
func cleanExeMappings(smaps []byte, exe string) [][2]uintptr {
	var out [][2]uintptr
	var cur [2]uintptr
	in := false // cur is a read-only mapping of exe
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Bytes()
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		if r, ok := mappingRange(f[0]); ok {
			// 00400000-013f2000 r-xp 00000000 fe:00 9994356   /path/to/pibot
			in = len(f) >= 6 && string(f[5]) == exe && len(f[1]) == 4 && f[1][1] != 'w' && f[1][3] == 'p'
			cur = r
			continue
		}
		if in && string(f[0]) == "Anonymous:" && len(f) >= 2 {
			if string(f[1]) == "0" {
				out = append(out, cur)
			}
			in = false
		}
	}
	return out
}

// mappingRange parses "start-end" in hex, the first field of a mapping's
// header line in smaps.
func mappingRange(b []byte) ([2]uintptr, bool) {
	lo, hi, ok := bytes.Cut(b, []byte("-"))
	if !ok {
		return [2]uintptr{}, false
	}
	start, err1 := strconv.ParseUint(string(lo), 16, 64)
	end, err2 := strconv.ParseUint(string(hi), 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return [2]uintptr{}, false
	}
	return [2]uintptr{uintptr(start), uintptr(end)}, true
}
