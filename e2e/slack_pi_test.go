package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/providers/faux"
)

// piDir is where compat/pi-check.sh installs pi; "" when it is not there.
func piDir() string {
	cache := os.Getenv("PIBOT_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "pibot")
	}
	dir := filepath.Join(cache, "pi-0.73.1")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@mariozechner", "pi-coding-agent", "package.json")); err != nil {
		return ""
	}
	return dir
}

// The session files a Slack conversation writes (a DM main line with a
// thread branch, a channel thread) open in pi with the context pibot
// builds, leaf by leaf (compat/pi-context.mjs). Skipped until
// compat/pi-check.sh has installed pi.
func TestSlackSessionsOpenInPi(t *testing.T) {
	pi := piDir()
	node, err := exec.LookPath("node")
	if pi == "" || err != nil {
		t.Skip("pi is not installed (run compat/pi-check.sh once) or node is missing")
	}
	w := newSlackWorld(t, []faux.Turn{faux.Text("one"), faux.Text("two"), faux.Text("branch"), faux.Text("channel")})
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "q1"})
	a1 := w.waitSlack(slackOwnerDM, "", "one")
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "q2"})
	w.waitSlack(slackOwnerDM, "", "two")
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "q3", ThreadTS: a1.TS})
	w.waitSlack(slackOwnerDM, a1.TS, "branch")
	q := w.say(slacktest.Say{Channel: slackChannel, User: slackBob, Text: slackMention + " q4"})
	w.waitSlack(slackChannel, q, "channel")
	w.stop()
	checkSessionsInPi(t, pi, node, w.sessionFiles())
}

// checkSessionsInPi copies the session files pibot wrote and has pi
// 0.73.1 build the context of every leaf of each (compat/pi-context.mjs):
// it must be the context pibot builds.
func checkSessionsInPi(t *testing.T, pi, node string, files []string) {
	t.Helper()
	if len(files) < 2 {
		t.Fatalf("session files %q", files)
	}
	out := t.TempDir()
	var copies []string
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := filepath.Join(out, "s"+string(rune('a'+i))+".jsonl")
		if err := os.WriteFile(c, b, 0o600); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, c)
	}
	root, _ := filepath.Abs("..")
	gen := exec.Command("go", append([]string{"run", "./compat/cmd/writesessions", "-expect"}, copies...)...)
	gen.Dir = root
	if b, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("writesessions -expect: %v\n%s", err, b)
	}
	check := exec.Command(node, append([]string{filepath.Join(root, "compat", "pi-context.mjs")}, copies...)...)
	check.Env = append(os.Environ(), "PI_DIR="+pi)
	b, err := check.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "==") {
		t.Fatalf("pi-context: %v\n%s", err, b)
	}
	t.Log(strings.TrimSpace(string(b)))
}
