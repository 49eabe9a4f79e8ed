// Package buildinfo says which build of pibot is running: its version,
// the commit it was built from and that commit's date, and the Go version.
//
// A release build stamps the values with the linker:
//
//	go build -ldflags "-X github.com/pibot/pibot/internal/buildinfo.version=v1.2.3
//	  -X github.com/pibot/pibot/internal/buildinfo.commit=<sha>
//	  -X github.com/pibot/pibot/internal/buildinfo.date=<RFC 3339>" ./cmd/pibot
//
// (scripts/release does it). A plain `go build` in a git checkout is not
// stamped; Get then takes the module version, commit, commit time and
// dirty flag that the go command embeds from version control, so no build
// reports a bare "dev".
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// The linker's stamps (-ldflags -X). They are written only at link time
// and never at run time, which is why they may be package variables.
var (
	version string
	commit  string
	date    string
)

// Info describes one build.
type Info struct {
	// Version is the release version ("v1.2.3"), the module version the
	// go command derived from version control ("v0.0.0-20261201...-abc"),
	// or "devel" when nothing better is known.
	Version string
	// Commit is the full VCS revision, "" when unknown.
	Commit string
	// Date is the commit's time (RFC 3339), "" when unknown.
	Date string
	// Modified reports uncommitted changes in the checkout the binary was
	// built from.
	Modified bool
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// stamps are the linker's values, passed explicitly so that resolve is
// testable.
type stamps struct{ version, commit, date string }

// Get returns the running binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(stamps{version, commit, date}, bi, runtime.Version())
}

// resolve prefers the linker's stamps and fills what they leave empty
// from the go command's embedded build information (bi may be nil).
func resolve(s stamps, bi *debug.BuildInfo, goVersion string) Info {
	info := Info{Version: s.version, Commit: s.commit, Date: s.date, GoVersion: goVersion}
	if bi == nil {
		if info.Version == "" {
			info.Version = "devel"
		}
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	var vcsCommit, vcsTime string
	var vcsModified bool
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			vcsCommit = st.Value
		case "vcs.time":
			vcsTime = st.Value
		case "vcs.modified":
			vcsModified = st.Value == "true"
		}
	}
	stamped := info.Commit != ""
	if !stamped {
		info.Commit, info.Modified = vcsCommit, vcsModified
	}
	if info.Date == "" && (!stamped || info.Commit == vcsCommit) {
		info.Date = vcsTime
	}
	if info.Version == "" {
		info.Version = moduleVersion(bi.Main.Version, info.Commit, info.Modified)
	}
	return info
}

// moduleVersion is the version of an unstamped build: the main module's
// version when the go command knows one (go install module@version, or
// derived from a VCS tag or commit since Go 1.24), else "devel" with the
// short commit.
func moduleVersion(mod, commit string, modified bool) string {
	if mod != "" && mod != "(devel)" {
		return mod
	}
	v := "devel"
	if commit != "" {
		v += "-" + short(commit)
		if modified {
			v += "+dirty"
		}
	}
	return v
}

// short is the first 12 characters of a commit id.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// String is the one-line form of `pibot version` and the start-up log:
// "pibot v1.2.3 (commit abc123def456, 2026-12-01T15:21:11Z, go1.26.8 linux/amd64)".
func (i Info) String() string {
	var parts []string
	if i.Commit != "" {
		c := "commit " + short(i.Commit)
		if i.Modified {
			c += " (modified)"
		}
		parts = append(parts, c)
	} else {
		parts = append(parts, "commit unknown")
	}
	if i.Date != "" {
		parts = append(parts, i.Date)
	}
	parts = append(parts, i.GoVersion+" "+runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("pibot %s (%s)", i.Version, strings.Join(parts, ", "))
}
