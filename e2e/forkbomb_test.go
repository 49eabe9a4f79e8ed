//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
	"github.com/pibot/pibot/tools/jail/jailtest"
)

// The fork bomb test runs the real binary as a service manager would: as
// a user (nobody) in a pids cgroup of its own that allows bombTasks tasks
// and is delegated to that user (systemd's User=, TasksMax=300 and
// Delegate=yes; docker --pids-limit 300), below the default
// agent.limits.processes of 1,024. Telegram polls the fake Bot API; the
// model is scripted.

const (
	bombTasks = 300
	bombUID   = 65534 // nobody
	bombToken = "4343:bomb-test-token"
	bombChat  = 3001
	calmChat  = 3002
	// bomb2Chat is where the second bomb runs: the faux model numbers
	// its tool calls from call_1 in every process, and a restarted
	// pibot would take the second bomb's call_1 for the first's, whose
	// result the first chat's session holds.
	bomb2Chat = 3003
	// bombHolds is the fewest tasks the cgroup holds while the bomb
	// runs: pibot's own and the bomb's, most of the budget.
	bombHolds = 150
)

var (
	bombUser  = models.User{ID: bombChat, FirstName: "Mallory", Username: "mallory"}
	calmUser  = models.User{ID: calmChat, FirstName: "Carol", Username: "carol"}
	bomb2User = models.User{ID: bomb2Chat, FirstName: "Trudy", Username: "trudy"}
)

// bombScript is a faux model script whose first answer runs a fork bomb
// through bash for timeout seconds: a line in bomb.txt counts its runs,
// then four loops fork processes that stay (sleeps) and never stop
// trying, so they take every task the jail lets them have.
func bombScript(timeout int) string {
	return fmt.Sprintf(`      - tool_calls:
          - name: bash
            args: {command: "echo ran >> bomb.txt; for i in 1 2 3 4; do (while :; do sleep 100 & done) 2>/dev/null & done; sleep 100", timeout: %d}
`, timeout)
}

// bombWorld is the fake Bot API, the cgroup and a directory the user owns
// (the binary, its configuration, the data directory and the workspace).
type bombWorld struct {
	t   *testing.T
	dir string
	bin string
	cg  *jailtest.Cgroup
	srv *telegramtest.Server
}

func newBombWorld(t *testing.T) *bombWorld {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: to create a pids cgroup and run pibot as another user in it")
	}
	w := &bombWorld{t: t, cg: jailtest.PidsCgroup(t, bombTasks), srv: telegramtest.New(bombToken)}
	t.Cleanup(w.srv.Close)
	dir, err := os.MkdirTemp("", "pibot-e2e-bomb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w.dir = dir
	for _, d := range []string{"data", "workspace"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(crashBuild(t))
	if err != nil {
		t.Fatal(err)
	}
	w.bin = filepath.Join(dir, "pibot")
	if err := os.WriteFile(w.bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	err = filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, bombUID, bombUID)
	})
	if err != nil {
		t.Fatal(err)
	}
	w.srv.AddChat(models.Chat{ID: bombChat, Type: models.ChatTypePrivate, FirstName: "Mallory"})
	w.srv.AddChat(models.Chat{ID: calmChat, Type: models.ChatTypePrivate, FirstName: "Carol"})
	w.srv.AddChat(models.Chat{ID: bomb2Chat, Type: models.ChatTypePrivate, FirstName: "Trudy"})
	return w
}

// start runs pibot serve in the cgroup as the user, with a faux model
// that plays script (a YAML list indented for providers.f.script) and
// then echoes, and waits until it is ready.
func (w *bombWorld) start(script string) *crashPibot {
	w.t.Helper()
	if script != "" {
		script = "\n    script:\n" + script
	}
	addr := crashFreeAddr(w.t)
	cfg := filepath.Join(w.dir, "pibot.yaml")
	yaml := fmt.Sprintf(`data_dir: %s
http:
  listen: %s
access:
  owners: ["telegram:%d", "telegram:%d", "telegram:%d"]
adapters:
  web:
    enabled: false
  telegram:
    token: %q
    api_url: %s
    mode: polling
providers:
  f:
    api: faux
    models:
      - id: m%s
agent:
  model: f/m
  workspace: %s
  sandbox: "off"
`, filepath.Join(w.dir, "data"), addr, bombChat, calmChat, bomb2Chat, bombToken, w.srv.URL, script, filepath.Join(w.dir, "workspace"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Chown(cfg, bombUID, bombUID); err != nil {
		w.t.Fatal(err)
	}
	cmd := w.cg.Command(w.t, bombUID, bombUID, w.bin, "serve", "-c", cfg, "--listen", addr)
	cmd.Dir = w.dir
	cmd.Env = []string{"HOME=" + w.dir, "PATH=" + os.Getenv("PATH")}
	p, out := crashLaunchCmd(w.t, cmd, addr)
	if taken, err := p.waitReady(out); err != nil || taken {
		w.t.Fatalf("pibot in a cgroup of %d tasks did not start (address taken: %v): %v", bombTasks, taken, err)
	}
	return p
}

// runs is how often the bomb ran (the lines of bomb.txt).
func (w *bombWorld) runs() int {
	b, _ := os.ReadFile(filepath.Join(w.dir, "workspace", "bomb.txt"))
	return strings.Count(string(b), "ran\n")
}

// said is the bot's visible messages in chat.
func (w *bombWorld) said(chat int64) string {
	var all []string
	for _, m := range w.srv.Messages(chat) {
		all = append(all, m.Text)
	}
	return strings.Join(all, "\n---\n")
}

// waitAnswer waits for the faux model's complete echo of text in chat;
// on failure it shows the chat and p's log.
func (w *bombWorld) waitAnswer(p *crashPibot, chat int64, text string, within time.Duration) {
	w.t.Helper()
	for deadline := time.Now().Add(within); answered(w.said(chat), text) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			w.t.Fatalf("no answer to %q after %v; bot messages:\n%s\npibot's log:\n%s", text, within, w.said(chat), p.stderr)
		}
	}
}

// holding waits until the bomb holds most of the cgroup's tasks.
func (w *bombWorld) holding() {
	w.t.Helper()
	crashWait(w.t, "the bomb to hold the tools' budget", 30*time.Second, func() bool { return w.cg.Current() >= bombHolds })
}

// alive checks that p still runs and never failed to start a thread.
func alive(t *testing.T, p *crashPibot) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("pibot exited:\n%s", p.stderr)
	default:
	}
	for _, crash := range []string{"pthread_create failed", "failed to create new OS thread", "fatal error"} {
		if strings.Contains(p.stderr.String(), crash) {
			t.Fatalf("pibot logged %q:\n%s", crash, p.stderr)
		}
	}
}

// namesLimit reports whether the tool result names the limit the first
// bomb hit: the tools' budget under pibot's cgroup.
func namesLimit(result string) bool {
	return strings.Contains(result, "Command timed out after 20 seconds. The process limit of ") &&
		strings.Contains(result, " was reached: starting more processes or threads failed. It is what pibot's cgroup, which may hold 300 tasks, leaves all tool calls together")
}

// toolResults returns the text of every tool result in the sessions.
func (w *bombWorld) toolResults() []string {
	w.t.Helper()
	var out []string
	_ = filepath.WalkDir(filepath.Join(w.dir, "data", "sessions"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return nil
		}
		s, err := session.OpenFile(path, session.Options{ReadOnly: true})
		if err != nil {
			w.t.Fatalf("open session %s: %v", path, err)
		}
		defer s.Close()
		for _, e := range s.Tree().Entries() {
			if e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleToolResult {
				out = append(out, e.Message.Text())
			}
		}
		return nil
	})
	return out
}

// TestForkBombUnderServiceBudget replays issue #29: pibot's service allows
// 300 tasks, fewer than a call's own limit of 1,024, and the model runs a
// fork bomb. While the bomb holds all it may, another conversation is
// answered, message after message; the call ends with an error naming the
// limit and pibot's cgroup. Then a second bomb, and pibot is killed with
// SIGKILL while it runs: as a user (no PID namespace) the bomb's processes
// outlive it, yet the next start comes up in the same cgroup, ends them,
// does not run the bomb again (its outcome is unknown) and answers both
// conversations. Before the tools' budget, the bomb took the cgroup's last
// task and pibot died with "runtime/cgo: pthread_create failed".
func TestForkBombUnderServiceBudget(t *testing.T) {
	w := newBombWorld(t)
	began := time.Now()
	p := w.start(bombScript(20))
	w.srv.AddText(bombChat, bombUser, "please run this")
	crashWait(t, "the bomb to run", 30*time.Second, func() bool { return w.runs() == 1 })
	w.holding()
	held := 0
	for i := range 3 {
		text := fmt.Sprintf("still there %d", i+1)
		w.srv.AddText(calmChat, calmUser, text)
		w.waitAnswer(p, calmChat, text, 30*time.Second)
		n := w.cg.Current()
		if n < bombHolds {
			t.Fatalf("%q was answered only after the bomb ended (%d tasks in the cgroup)", text, n)
		}
		held = max(held, n)
		alive(t, p)
	}
	w.waitAnswer(p, bombChat, "please run this", 60*time.Second)
	alive(t, p)
	results := w.toolResults()
	if len(results) != 1 || !namesLimit(results[0]) {
		t.Errorf("tool results %q, want the bomb's, naming the limit it hit", results)
	}
	t.Logf("first bomb: the cgroup held up to %d of %d tasks while pibot answered 3 messages; %v; the call ended with %q",
		held, bombTasks, time.Since(began).Round(time.Second), results)
	p.stop()

	// The second bomb outlives pibot.
	p = w.start(bombScript(120))
	w.srv.AddText(bomb2Chat, bomb2User, "run it again")
	crashWait(t, "the second bomb to run", 30*time.Second, func() bool { return w.runs() == 2 })
	w.holding()
	p.kill()
	left := w.cg.Current()
	t.Logf("pibot killed with the bomb running: %d tasks left in the cgroup", left)
	restarted := time.Now()
	p = w.start("")
	crashWait(t, "the stale bomb to be ended", 30*time.Second, func() bool { return w.cg.Current() < bombHolds })
	w.srv.AddText(calmChat, calmUser, "after the restart")
	w.waitAnswer(p, calmChat, "after the restart", 60*time.Second)
	w.waitAnswer(p, bomb2Chat, "run it again", 60*time.Second)
	crashWait(t, "the user told the bomb's outcome is unknown", 30*time.Second, func() bool {
		return strings.Contains(w.said(bomb2Chat), "interrupted while bash was running")
	})
	time.Sleep(time.Second) // a second run would show meanwhile
	alive(t, p)
	if n := w.runs(); n != 2 {
		t.Errorf("the bomb ran %d times, want 2 (never again after the restart)", n)
	}
	results = w.toolResults()
	if len(results) != 2 || !slices.Contains(results, unknownOutcome) || !slices.ContainsFunc(results, namesLimit) {
		t.Errorf("tool results %q, want the first bomb's limit and the second one's outcome unknown", results)
	}
	t.Logf("after the restart (%v): the stale bomb ended, both conversations answered, nothing run again", time.Since(restarted).Round(time.Second))
	p.stop()
}
