package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/tools/jail"
)

// TestMain lets the test binary act as the jail's launcher.
func TestMain(m *testing.M) {
	jail.Main()
	os.Exit(m.Run())
}

// testLimits are the limits of bashSet's jail: pibot's defaults, with a
// smaller process cap.
var testLimits = jail.Limits{Processes: 256, Memory: 2 << 30, CPUTime: 10 * time.Minute, FileSize: 1 << 30}

// bashSet returns a Set whose bash runs through a jail with testLimits
// and whose environment carries a marker, so the test can find every
// process it started in /proc.
func bashSet(t *testing.T) (*Set, string) {
	t.Helper()
	return bashSetWith(t, testLimits, 0)
}

func bashSetWith(t *testing.T, l jail.Limits, maxOutput int64) (*Set, string) {
	t.Helper()
	marker := fmt.Sprintf("PIBOT_TEST_MARKER=%s-%d", t.Name(), time.Now().UnixNano())
	env := append(DefaultEnv(t.TempDir()), marker)
	j, err := jail.New(jail.Config{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(t.Context(), Options{Workspace: t.TempDir(), Env: env, TempDir: t.TempDir(), Jail: j, MaxOutputFile: maxOutput})
	if err != nil {
		t.Fatal(err)
	}
	return s, marker
}

// strays lists live processes whose environment holds marker.
func strays(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(b), marker) {
			out = append(out, e.Name())
		}
	}
	return out
}

func assertNoStrays(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := strays(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes left: %v", len(left), left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBashTexts(t *testing.T) {
	s, _ := bashSet(t)
	cases := []struct {
		name, args, want string
		isErr            bool
	}{
		{"output", `{"command":"echo hi"}`, "hi\n", false},
		{"no output", `{"command":"true"}`, "(no output)", false},
		{"exit code", `{"command":"echo out; echo err >&2; exit 3"}`, "out\nerr\n\n\nCommand exited with code 3", true},
		{"exit code no output", `{"command":"exit 1"}`, "(no output)\n\nCommand exited with code 1", true},
		// The timeout leaves room for starting the jail's launcher on a busy host.
		{"timeout", `{"command":"echo started; sleep 30","timeout":2.5}`, "started\n\n\nCommand timed out after 2.5 seconds", true},
		{"invalid utf8", `{"command":"printf 'bad:[\\xff\\xfe] end\\n'"}`, "bad:[\uFFFD\uFFFD] end\n", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, isErr, _ := call(t, s, "bash", c.args)
			if got != c.want || isErr != c.isErr {
				t.Errorf("got (%v) %q, want (%v) %q", isErr, got, c.isErr, c.want)
			}
		})
	}
}

func TestBashAbort(t *testing.T) {
	s, marker := bashSet(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(2*time.Second, cancel) // room for the launcher on a busy host
	got, isErr, _ := callCtx(ctx, t, s, "bash", `{"command":"echo working; sleep 30 & sleep 30"}`)
	if !isErr || got != "working\n\n\nCommand aborted" {
		t.Errorf("got %q", got)
	}
	assertNoStrays(t, marker)
}

func TestBashTruncation(t *testing.T) {
	s, _ := bashSet(t)
	t.Run("lines", func(t *testing.T) {
		got, isErr, det := call(t, s, "bash", `{"command":"seq 1 3000"}`)
		var d BashDetails
		if err := json.Unmarshal([]byte(det), &d); err != nil || d.Truncation == nil {
			t.Fatalf("details %q: %v", det, err)
		}
		want := lines(1999, func(i int) string { return itoa(i + 1001) }) + "\n\n\n[Showing lines 1002-3001 of 3001. Full output: " + d.FullOutputPath + "]"
		if isErr || got != want {
			t.Errorf("got %q", trim(got))
		}
		if !strings.HasPrefix(filepath.Base(d.FullOutputPath), "pi-bash-") || len(filepath.Base(d.FullOutputPath)) != len("pi-bash-0123456789abcdef.log") {
			t.Errorf("full output path %s", d.FullOutputPath)
		}
		full, _ := os.ReadFile(d.FullOutputPath)
		if len(strings.Split(string(full), "\n")) != 3001 {
			t.Errorf("full output has %d bytes", len(full))
		}
		if *d.Truncation.TruncatedBy != "lines" || d.Truncation.OutputLines != 2000 || d.Truncation.TotalLines != 3001 {
			t.Errorf("truncation %+v", d.Truncation)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		got, _, det := call(t, s, "bash", `{"command":"for i in $(seq 1 100); do printf '%0999d\\n' $i; done"}`)
		var d BashDetails
		json.Unmarshal([]byte(det), &d) //nolint:errcheck // checked below
		if d.Truncation == nil || !strings.HasSuffix(got, "\n\n[Showing lines 50-101 of 101 (50.0KB limit). Full output: "+d.FullOutputPath+"]") {
			t.Errorf("got %q", trim(got))
		}
	})
	t.Run("partial line", func(t *testing.T) {
		got, _, det := call(t, s, "bash", `{"command":"head -c 204875 /dev/zero | tr '\\0' 'z'"}`)
		var d BashDetails
		json.Unmarshal([]byte(det), &d) //nolint:errcheck // checked below
		want := strings.Repeat("z", 51200) + "\n\n[Showing last 50.0KB of line 1 (line is 200.1KB). Full output: " + d.FullOutputPath + "]"
		if got != want {
			t.Errorf("got %q", trim(got))
		}
		if d.Truncation == nil || !d.Truncation.LastLinePartial || d.Truncation.OutputBytes != 51200 || d.Truncation.TotalBytes != 204875 {
			t.Errorf("truncation %+v", d.Truncation)
		}
	})
}

func TestBashStreamsSnapshots(t *testing.T) {
	s, _ := bashSet(t)
	var updates []llm.ToolOutput
	_, err := s.Get("bash").Execute(t.Context(), "c", json.RawMessage(`{"command":"echo one; sleep 0.3; echo two"}`), func(o llm.ToolOutput) {
		updates = append(updates, o)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(updates) < 2 || len(updates[0].Content) != 0 {
		t.Fatalf("updates = %+v", updates)
	}
	last := updates[len(updates)-1]
	if last.Content[0].Text != "one\ntwo\n" {
		t.Errorf("last snapshot %q", last.Content[0].Text)
	}
}

func TestBashContainment(t *testing.T) {
	cases := []struct{ name, args, wantSuffix string }{
		{"infinite loop", `{"command":"while :; do :; done","timeout":0.5}`, "Command timed out after 0.5 seconds"},
		{"fork bomb", `{"command":"f(){ if [ $1 -lt 7 ]; then f $(($1+1)) & f $(($1+1)) & fi; sleep 60; }; f 0","timeout":1}`, "Command timed out after 1 seconds"},
		{"background child", `{"command":"sleep 1000 & echo started"}`, "started\n"},
		{"100 MB of output", `{"command":"head -c 100000000 /dev/zero | tr '\\0' 'a' | fold -w 100"}`, "Full output: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, marker := bashSet(t)
			start := time.Now()
			got, _, _ := call(t, s, "bash", c.args)
			if !strings.Contains(got, c.wantSuffix) {
				t.Errorf("got %q", trim(got))
			}
			if len(got) > DefaultMaxBytes+1024 {
				t.Errorf("output of %d bytes", len(got))
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %v", d)
			}
			assertNoStrays(t, marker)
		})
	}
}
