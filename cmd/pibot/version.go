package main

import (
	"fmt"
	"runtime"

	"github.com/pibot/pibot/internal/buildinfo"
)

// runVersion runs `pibot version`: the release version, the commit and its
// date, and the Go toolchain, one per line (`--short`: the version alone).
func runVersion(c *cli, args []string) error {
	fs := c.newFlags("version")
	short := fs.Bool("short", false, "print the version alone")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("version", pos, 0, "no arguments"); err != nil {
		return err
	}
	info := buildinfo.Get()
	if *short {
		_, err := fmt.Fprintln(c.stdout, info.Version)
		return err
	}
	commit, date := info.Commit, info.Date
	if commit == "" {
		commit = "unknown (built without version control information)"
	} else if info.Modified {
		commit += " (with uncommitted changes)"
	}
	if date == "" {
		date = "unknown"
	}
	_, err = fmt.Fprintf(c.stdout, "pibot %s\ncommit: %s\ndate:   %s\ngo:     %s %s/%s\n",
		info.Version, commit, date, info.GoVersion, runtime.GOOS, runtime.GOARCH)
	return err
}
