package deploy

import (
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// versionOf runs `pibot version` of a built binary.
func versionOf(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	return string(out)
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds pibot; skipped with -short")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
}

// TestRelease runs scripts/release for this machine's platform and checks
// the binary: static, stamped with the version, the checkout's commit and
// its date, and listed with its SHA-256 in SHA256SUMS.
func TestRelease(t *testing.T) {
	needTools(t, "bash", "git", "go")
	out := t.TempDir()
	cmd := exec.Command("bash", "scripts/release", "-o", out, "v0.0.0-releasetest")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "PIBOT_TARGETS="+runtime.GOOS+"/"+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, b)
	}
	name := "pibot-v0.0.0-releasetest-" + runtime.GOOS + "-" + runtime.GOARCH
	bin := filepath.Join(out, name)
	v := versionOf(t, bin)
	commit := git(t, "..", "rev-parse", "HEAD")
	date := git(t, "..", "-c", "log.showSignature=false", "show", "-s", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", "--format=%cd", "HEAD")
	for _, w := range []string{"pibot v0.0.0-releasetest\n", "commit: " + commit + "\n", "go:     " + runtime.Version()} {
		if !strings.Contains(v, w) {
			t.Errorf("version output lacks %q:\n%s", w, v)
		}
	}
	// git's local time zone may differ from the script's TZ=UTC: compare the day.
	if !strings.Contains(v, "date:   "+date[:8]) {
		t.Errorf("version output lacks the commit date %s:\n%s", date, v)
	}
	if runtime.GOOS == "linux" {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("the release binary asks for a dynamic loader: it is not static")
			}
		}
		if s := f.Section(".symtab"); s != nil {
			t.Error("the release binary keeps its symbol table (-s -w missing)")
		}
	}
	sums, err := os.Open(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	sc := bufio.NewScanner(sums)
	found := false
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[1] == name {
			found = f[0] == hex.EncodeToString(sum[:])
		}
	}
	if !found {
		t.Errorf("SHA256SUMS has no correct line for %s", name)
	}
}

// TestPlainBuildNamesItsCommit builds pibot with a plain `go build` in a
// fresh git checkout of the working tree and checks that `pibot version`
// names the commit from Go's embedded VCS information instead of "dev".
// (A git worktree, whose .git is a file, gets no VCS information from the
// go command; neither does GOFLAGS=-buildvcs=false, so the test sets it.)
func TestPlainBuildNamesItsCommit(t *testing.T) {
	needTools(t, "git", "go")
	src := t.TempDir()
	files := strings.Split(git(t, "..", "ls-files", "--cached", "--others", "--exclude-standard"), "\n")
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			continue // deleted in the working tree
		}
		dst := filepath.Join(src, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, src, "init", "-q")
	git(t, src, "add", ".")
	git(t, src, "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "snapshot")
	commit := git(t, src, "rev-parse", "HEAD")
	bin := filepath.Join(t.TempDir(), "pibot")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/pibot")
	cmd.Dir = src
	// CGO_ENABLED=0 and -trimpath as in TestRelease, so that the two
	// builds share the compiled packages and only the link differs.
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	v := versionOf(t, bin)
	first, _, _ := strings.Cut(v, "\n")
	if first == "pibot dev" || first == "pibot devel" || !strings.Contains(first, commit[:12]) {
		t.Errorf("first line %q: want a version naming commit %s", first, commit[:12])
	}
	if !strings.Contains(v, "commit: "+commit+"\n") || strings.Contains(v, "date:   unknown") {
		t.Errorf("version output lacks the commit %s and its date:\n%s", commit, v)
	}
}
