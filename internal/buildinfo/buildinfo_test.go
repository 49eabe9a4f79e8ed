package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func vcs(rev, time, modified string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/pibot/pibot", Version: "(devel)"}}
	for _, s := range []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: time}, {Key: "vcs.modified", Value: modified}} {
		if s.Value != "" {
			bi.Settings = append(bi.Settings, s)
		}
	}
	return bi
}

func TestResolve(t *testing.T) {
	const rev = "2fb2c96a1b2c3d4e5f60718293a4b5c6d7e8f901"
	const other = "1111111111111111111111111111111111111111"
	pseudo := vcs(rev, "2026-12-01T15:00:00Z", "false")
	pseudo.Main.Version = "v0.0.0-20261201150000-2fb2c96a1b2c"
	tests := []struct {
		name   string
		stamps stamps
		bi     *debug.BuildInfo
		want   Info
	}{
		{"release stamps win", stamps{"v1.2.3", rev, "2026-12-01T15:00:00Z"}, vcs(rev, "2026-11-30T00:00:00Z", "false"),
			Info{Version: "v1.2.3", Commit: rev, Date: "2026-12-01T15:00:00Z", GoVersion: "go1.26.8"}},
		{"stamped version only takes the VCS commit", stamps{version: "v1.2.3"}, vcs(rev, "2026-12-01T15:00:00Z", "true"),
			Info{Version: "v1.2.3", Commit: rev, Date: "2026-12-01T15:00:00Z", Modified: true, GoVersion: "go1.26.8"}},
		{"stamped commit does not borrow another commit's date", stamps{version: "v1.2.3", commit: other}, vcs(rev, "2026-12-01T15:00:00Z", "false"),
			Info{Version: "v1.2.3", Commit: other, GoVersion: "go1.26.8"}},
		{"plain build in a checkout", stamps{}, vcs(rev, "2026-12-01T15:00:00Z", "false"),
			Info{Version: "devel-2fb2c96a1b2c", Commit: rev, Date: "2026-12-01T15:00:00Z", GoVersion: "go1.26.8"}},
		{"plain build with local changes", stamps{}, vcs(rev, "2026-12-01T15:00:00Z", "true"),
			Info{Version: "devel-2fb2c96a1b2c+dirty", Commit: rev, Date: "2026-12-01T15:00:00Z", Modified: true, GoVersion: "go1.26.8"}},
		{"module version derived by the go command", stamps{}, pseudo,
			Info{Version: "v0.0.0-20261201150000-2fb2c96a1b2c", Commit: rev, Date: "2026-12-01T15:00:00Z", GoVersion: "go1.26.8"}},
		{"no VCS information", stamps{}, vcs("", "", ""),
			Info{Version: "devel", GoVersion: "go1.26.8"}},
		{"no build information", stamps{}, nil,
			Info{Version: "devel", GoVersion: "go0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resolve(tt.stamps, tt.bi, "go0"); got != tt.want {
				t.Errorf("resolve = %+v\nwant      %+v", got, tt.want)
			}
		})
	}
}

func TestStringNamesEveryPart(t *testing.T) {
	tests := []struct {
		info Info
		want []string
	}{
		{Info{Version: "v1.2.3", Commit: "2fb2c96a1b2c3d4e", Date: "2026-12-01T15:00:00Z", GoVersion: "go1.26.8"},
			[]string{"pibot v1.2.3 (", "commit 2fb2c96a1b2c,", "2026-12-01T15:00:00Z", "go1.26.8"}},
		{Info{Version: "devel", Commit: "abc", Modified: true, GoVersion: "go1.26.8"},
			[]string{"pibot devel (", "commit abc (modified)", "go1.26.8"}},
		{Info{Version: "devel", GoVersion: "go1.26.8"}, []string{"commit unknown"}},
	}
	for _, tt := range tests {
		s := tt.info.String()
		for _, w := range tt.want {
			if !strings.Contains(s, w) {
				t.Errorf("%+v.String() = %q, want it to contain %q", tt.info, s, w)
			}
		}
	}
}
