package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pibot/pibot/tools/jail"
)

// binary is the pibot executable built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	jail.Main() // the launcher of the bash calls of toolboxes made in-process
	if os.Getenv(mcpServerEnv) == "1" {
		os.Exit(runTestMCPServer()) // started by pibot as a stdio MCP server
	}
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := binaryDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Two test processes of one checkout share dir: cachedBinary builds
	// one at a time and installs the binary atomically.
	binary, err = cachedBinary(dir, func(out string) error {
		cmd := exec.Command("go", "build", "-ldflags", "-X github.com/pibot/pibot/internal/buildinfo.version=v0.0.0-test -X github.com/pibot/pibot/internal/buildinfo.commit=0123456789abcdef0123456789abcdef01234567 -X github.com/pibot/pibot/internal/buildinfo.date=2026-12-01T12:00:00Z", "-o", out, ".")
		cmd.Stderr = os.Stderr
		return cmd.Run()
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "build pibot:", err)
		return 1
	}
	// The tests marked parallel mostly wait on pibot processes, fake
	// servers and their timers, not on the CPU: run more of them at once
	// than -parallel's default (GOMAXPROCS) unless -parallel was given.
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "8")
	}
	return m.Run()
}

// binaryDir is where the test binary of pibot is kept between runs: one
// directory per checkout (so worktrees do not overwrite each other's) in
// the user's cache directory, or the temporary one.
func binaryDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	sum := sha256.Sum256([]byte(wd))
	dir := filepath.Join(base, "pibot-test", hex.EncodeToString(sum[:8]))
	return dir, os.MkdirAll(dir, 0o700)
}

// result is one finished pibot process.
type result struct {
	stdout, stderr string
	code           int
}

// pibot runs the binary in dir with a clean environment (HOME=dir, no
// provider keys) plus env ("K=V"), feeding stdin.
func pibot(t *testing.T, dir, stdin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run pibot %v: %v", args, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// ok runs pibot and fails the test unless it exits 0.
func ok(t *testing.T, dir string, args ...string) string {
	t.Helper()
	r := pibot(t, dir, "", nil, args...)
	if r.code != 0 {
		t.Fatalf("pibot %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// vectorsDir finds shared/testdata/pi by walking up from the working dir.
func vectorsDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		for _, cand := range []string{filepath.Join(dir, "shared", "testdata", "pi"), filepath.Join(dir, "..", "shared", "testdata", "pi")} {
			if _, err := os.Stat(filepath.Join(cand, "manifest.json")); err == nil {
				return cand
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("shared/testdata/pi not found")
		}
		dir = parent
	}
}

// copyVector copies NAME.jsonl into dir and returns the copy's path.
func copyVector(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(vectorsDir(t), name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".jsonl")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// jsonLines decodes every non-blank line of data.
func jsonLines(t *testing.T, data string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for i, line := range strings.Split(data, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d: %v: %.200s", i+1, err, line)
		}
		out = append(out, m)
	}
	return out
}

// sameContext compares the messages, thinkingLevel and model of two
// decoded contexts.
func sameContext(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	for _, k := range []string{"messages", "thinkingLevel", "model"} {
		if !reflect.DeepEqual(got[k], want[k]) {
			gb, _ := json.Marshal(got[k])
			wb, _ := json.Marshal(want[k])
			t.Fatalf("%s: %s differs:\n got %.400s\nwant %.400s", what, k, gb, wb)
		}
	}
}
