package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
)

// TestWorktreePerThreadSlack runs the real binary on a fake Slack with an
// agent whose workspace is a git repository and worktree: per_thread: two
// threads of #web write the same file at once, each in a worktree and on
// a branch of its own; after a restart a thread goes on in its worktree,
// and !diff in each thread shows only its own change.
func TestWorktreePerThreadSlack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pibot")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/pibot/pibot/cmd/pibot").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	repo := filepath.Join(dir, "web")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, d := range []string{"ws", "web"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "shared.txt"), []byte("base"), 0o600); err != nil {
		t.Fatal(err)
	}
	git("add", "shared.txt")
	git("commit", "-q", "-m", "base")

	model := newAgentsModel(t)
	sl := slacktest.New()
	sl.TeamID = "T0TEAM"
	t.Cleanup(sl.Close)
	const web = "C0WEB"
	cfg := fmt.Sprintf(`data_dir: ./data
http: {listen: '127.0.0.1:0'}
providers:
  fake: {api: openai-completions, base_url: %q, api_key: k, models: [{id: default-model}, {id: web-model}]}
agent:
  workspace: ./ws
  model: fake/default-model
  sandbox: "off"
  approvals: {group: {write: allow}}
agents:
  web:
    workspace: ./web
    model: fake/web-model
    workspace_only: true
    tools: [read, write, ls]
    worktree: per_thread
bindings:
  - {agent: web, platform: slack, channel: C0WEB}
access:
  owners: ["slack:UOWNER"]
  groups: ["slack:C0WEB"]
adapters:
  web: {enabled: false}
  slack: {bot_token: %q, app_token: %q, api_url: %q}
`, model.URL+"/v1", sl.BotToken, sl.AppToken, sl.APIURL)
	if err := os.WriteFile(filepath.Join(dir, "pibot.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runIn(dir, bin, "config", "check", "-c", "pibot.yaml"); err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}

	stop := startServe(t, dir, bin, sl, 1)
	sayIn := func(thread, text string) string {
		ts, bodies := sl.Post(slacktest.Say{Channel: web, ThreadTS: thread, User: "UOWNER", Text: text})
		for _, b := range bodies {
			id := sl.Deliver("events_api", b)
			if err := sl.WaitAck(id, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		return ts
	}
	// botSaid waits for n finished bot messages containing sub and returns
	// the last.
	botSaid := func(sub string, n int) string {
		var found []string
		waitUntil(t, fmt.Sprintf("%d bot messages with %q", n, sub), 30*time.Second, func() bool {
			found = nil
			for _, m := range sl.Messages(web) {
				if m.User == sl.BotUserID && strings.Contains(m.Text, sub) && (m.Stream == nil || m.Stream.Stopped) {
					found = append(found, m.Text)
				}
			}
			return len(found) >= n
		})
		return found[len(found)-1]
	}

	// Two threads at once, the same file.
	a := sayIn("", "<@UBOT> WRITE shared.txt from-a")
	b := sayIn("", "<@UBOT> WRITE shared.txt from-b")
	botSaid("done:", 2)
	treeOf := func(ts string) string {
		return filepath.Join(repo, ".pibot-worktrees", "slack-C0WEB-"+strings.ReplaceAll(ts, ".", "-"))
	}
	read := func(p string) string {
		t.Helper()
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}
	waitUntil(t, "both files", 10*time.Second, func() bool {
		ga, _ := os.ReadFile(filepath.Join(treeOf(a), "shared.txt"))
		gb, _ := os.ReadFile(filepath.Join(treeOf(b), "shared.txt"))
		return string(ga) == "from-a" && string(gb) == "from-b"
	})
	if got := read(filepath.Join(repo, "shared.txt")); got != "base" {
		t.Fatalf("the repository's checkout changed: %q", got)
	}

	// A restart in the middle: thread a goes on in its worktree.
	stop()
	stop = startServe(t, dir, bin, sl, 2)
	defer stop()
	sayIn(a, "<@UBOT> WRITE shared.txt again-a")
	botSaid("done:", 3)
	waitUntil(t, "thread a's second write", 10*time.Second, func() bool {
		got, _ := os.ReadFile(filepath.Join(treeOf(a), "shared.txt"))
		return string(got) == "again-a"
	})
	branches := strings.Fields(git("branch", "--list", "pibot/*", "--format=%(refname:short)"))
	want := []string{"pibot/slack-C0WEB-" + strings.ReplaceAll(a, ".", "-"), "pibot/slack-C0WEB-" + strings.ReplaceAll(b, ".", "-")}
	slices.Sort(want)
	if !slices.Equal(branches, want) {
		t.Fatalf("branches %q, want %q", branches, want)
	}
	if st := git("status", "--porcelain"); st != "" {
		t.Fatalf("the repository's checkout sees: %q", st)
	}

	// !diff in each thread: its own change only.
	sayIn(b, "!diff")
	diffB := botSaid("+from-b", 1)
	if strings.Contains(diffB, "again-a") || strings.Contains(diffB, "from-a") {
		t.Fatalf("thread b's diff shows thread a's change:\n%s", diffB)
	}
	sayIn(a, "!diff")
	diffA := botSaid("+again-a", 1)
	if strings.Contains(diffA, "from-b") {
		t.Fatalf("thread a's diff shows thread b's change:\n%s", diffA)
	}
}

// startServe starts `pibot serve` in dir and waits until it is ready and
// connected to the fake Slack (its nth connection); stop interrupts it
// and waits for it to end.
func startServe(t *testing.T, dir, bin string, sl *slacktest.Server, nth int) (stop func()) {
	t.Helper()
	stop = serveReady(t, bin, dir).stop
	if err := sl.WaitConnected(nth, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return stop
}
