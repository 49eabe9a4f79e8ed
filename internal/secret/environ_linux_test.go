package secret

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestScrubEnviron runs a helper process with secrets in its environment
// that scrubs them and then prints what the kernel shows as its
// environment: the secrets are gone, the rest is intact.
func TestScrubEnviron(t *testing.T) {
	for _, dumpable := range []string{"1", "0"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestScrubHelper$")
		cmd.Env = []string{"SCRUB_HELPER=1", "SCRUB_DUMPABLE=" + dumpable, "API_KEY=sk-ABCDEF-secret", "KEEP=visible", "TOKEN=123:tg-secret"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper (dumpable %s): %v\n%s", dumpable, err, out)
		}
		got := string(out)
		if strings.Contains(got, "sk-ABCDEF-secret") || strings.Contains(got, "tg-secret") {
			t.Errorf("dumpable %s: secret still in /proc/self/environ: %q", dumpable, got)
		}
		if !strings.Contains(got, "KEEP=visible") || !strings.Contains(got, "getenv=\n") {
			t.Errorf("dumpable %s: got %q", dumpable, got)
		}
	}
}

func TestScrubHelper(t *testing.T) {
	if os.Getenv("SCRUB_HELPER") != "1" {
		t.Skip("helper process only")
	}
	if os.Getenv("SCRUB_DUMPABLE") == "0" {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := ScrubEnviron([]string{"API_KEY", "TOKEN", "ABSENT"}); err != nil {
		t.Fatal(err)
	}
	if d, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); os.Getenv("SCRUB_DUMPABLE") == "0" && d != 0 {
		t.Fatal("dumpable restored wrongly")
	}
	b, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString(strings.ReplaceAll(string(b), "\x00", "\n") + "getenv=" + os.Getenv("API_KEY") + "\n") //nolint:errcheck // read by the parent
}
