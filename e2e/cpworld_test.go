package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
)

// A crash-point world is one conversation through the real binary built
// with the crashpoints tag (internal/crashpoint): a fake Telegram Bot API
// in polling mode, the script model over SSE, a data directory and a
// workspace. pibot starts armed at one point, dies there, and is started
// again unarmed; the conversation goes on until every message is answered.

const (
	cpToken = "7000003:CrashPointSecret"
	cpChat  = 7301
)

var cpUser = models.User{ID: cpChat, FirstName: "Cleo"}

// crashBuildTags builds cmd/pibot with the build tags into a temporary
// directory.
func crashBuildTags(t testing.TB, tags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pibot")
	out, err := exec.Command("go", "build", "-tags", tags, "-o", bin, "github.com/pibot/pibot/cmd/pibot").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -tags %s ./cmd/pibot: %v\n%s", tags, err, out)
	}
	return bin
}

// cpWorld is one conversation's world.
type cpWorld struct {
	t     *testing.T
	bin   string
	dir   string // holds data/, ws/ and the config
	data  string
	ws    string
	cfg   string
	addr  string
	srv   *telegramtest.Server
	model *scriptModel
	p     *crashPibot
	// asked are the ids of the questions sent, in order.
	asked []string
	// crash is what the armed process left: its log, and the newest bot
	// message when it died (the one post the documented window allows
	// twice).
	crash *cpCrash
	logs  []string
}

// cpCrash is what is known of the moment the armed process died.
type cpCrash struct {
	log    string
	orphan *telegramtest.Message
	// file is the session file as the crash left it ("" if none).
	file string
}

// newCPWorld makes a world; pibot is not started yet.
func newCPWorld(t *testing.T, bin string) *cpWorld {
	t.Helper()
	w := &cpWorld{t: t, bin: bin, dir: t.TempDir(), srv: telegramtest.New(cpToken), model: newScriptModel(t, true)}
	t.Cleanup(w.srv.Close)
	w.data, w.ws, w.cfg = filepath.Join(w.dir, "data"), filepath.Join(w.dir, "ws"), filepath.Join(w.dir, "pibot.yaml")
	if err := os.MkdirAll(w.ws, 0o700); err != nil {
		t.Fatal(err)
	}
	w.addr = crashFreeAddr(t)
	yaml := fmt.Sprintf(`data_dir: %s
http:
  listen: %s
access:
  owners: ["telegram:%d"]
adapters:
  telegram:
    token: %q
    api_url: %q
providers:
  s:
    api: openai-completions
    base_url: %s/v1
    api_key: test
    models:
      - id: m
agent:
  model: s/m
  workspace: %s
  queue:
    mode: steer
`, w.data, w.addr, cpUser.ID, cpToken, w.srv.URL, w.model.URL, w.ws)
	if err := os.WriteFile(w.cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			w.logs = append(w.logs, w.p.stderr.String())
			t.Logf("pibot's logs:\n%s", strings.Join(w.logs, "\n--- restart ---\n"))
			t.Logf("bot messages:\n%s", w.said())
		}
	})
	return w
}

// start runs pibot, armed at spec ("" for none).
func (w *cpWorld) start(spec string) {
	w.t.Helper()
	var env []string
	if spec != "" {
		env = []string{"PIBOT_CRASHPOINT=" + spec}
	}
	w.p = crashStartEnv(w.t, w.bin, w.cfg, w.dir, w.addr, env)
}

// ask sends a user message naming itself id (its text starts "id:"; a
// command's arguments do).
func (w *cpWorld) ask(id, text string) {
	w.srv.AddText(cpChat, cpUser, text)
	w.asked = append(w.asked, id)
}

// until waits for cond and reports true; or, if the armed process dies
// meanwhile, records the crash, starts pibot again unarmed and reports
// false.
func (w *cpWorld) until(what string, cond func() bool) bool {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		select {
		case <-w.p.exited:
			w.crashed()
			return false
		default:
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// crashed records the death of the armed process and starts pibot again.
func (w *cpWorld) crashed() {
	w.t.Helper()
	log := w.p.stderr.String()
	w.logs = append(w.logs, log)
	if w.crash != nil {
		w.t.Fatalf("pibot died again after the restart:\n%s", log)
	}
	w.crash = &cpCrash{log: log}
	if files := sessionFiles(w.data); len(files) == 1 {
		b, _ := os.ReadFile(files[0])
		w.crash.file = string(b)
	}
	if msgs := w.srv.Messages(cpChat); len(msgs) > 0 {
		newest := msgs[len(msgs)-1]
		w.crash.orphan = &newest
	}
	w.start("")
}

// settle waits until every question asked is answered, Telegram has no
// update left to hand over, the inbox is empty and no reply is journaled
// as streaming.
// A message that is still unanswered when everything has been quiet for
// 5 s (nothing pending anywhere) was lost: the test says so then.
func (w *cpWorld) settle() {
	w.t.Helper()
	var quiet time.Time
	settled := func() bool {
		missing := w.unanswered()
		idle := w.srv.Pending() == 0 && cpInboxPending(w.data) == 0
		if n, _ := crashOpenReplies(w.data); n != 0 {
			idle = false
		}
		switch {
		case !idle:
			quiet = time.Time{}
		case len(missing) == 0:
			return true
		case quiet.IsZero():
			quiet = time.Now()
		case time.Since(quiet) > 5*time.Second:
			w.t.Fatalf("%q never answered, though every message was acknowledged and nothing is pending", missing)
		}
		return false
	}
	for !w.until("every message answered and acknowledged", settled) {
		quiet = time.Time{}
	}
}

// unanswered lists the questions whose answer's END marker no bot
// message shows.
func (w *cpWorld) unanswered() []string {
	said := w.said()
	var missing []string
	for _, id := range w.asked {
		if !strings.Contains(said, "END-"+id) {
			missing = append(missing, id)
		}
	}
	return missing
}

// shows reports whether a bot message contains sub.
func (w *cpWorld) shows(sub string) bool { return strings.Contains(w.said(), sub) }

// said is the bot's visible messages, oldest first.
func (w *cpWorld) said() string {
	var all []string
	for _, m := range w.srv.Messages(cpChat) {
		all = append(all, m.Text)
	}
	return strings.Join(all, "\n---\n")
}

// cpInboxPending counts the inbox items not acknowledged nor set aside,
// reading inbox.jsonl without opening the inbox.
func cpInboxPending(data string) int {
	b, err := os.ReadFile(filepath.Join(data, "inbox.jsonl"))
	if err != nil {
		return 1 // not written yet
	}
	pending := map[string]bool{}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		op, id := inboxOp(line)
		switch op {
		case "add", "keep":
			pending[id] = true
		case "ack", "quarantine":
			delete(pending, id)
		}
	}
	return len(pending)
}

// cpQuarantined counts the items the inbox file says were set aside.
func cpQuarantined(data string) int {
	b, _ := os.ReadFile(filepath.Join(data, "inbox.jsonl"))
	n := 0
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if op, _ := inboxOp(line); op == "quarantine" || op == "held" {
			n++
		}
	}
	return n
}

// toolRuns counts the lines the script model's tool appended.
func (w *cpWorld) toolRuns() int {
	b, _ := os.ReadFile(filepath.Join(w.ws, "tools.log"))
	return strings.Count(string(b), "ran\n")
}

// sessionFiles lists the session files of the data directory.
func sessionFiles(data string) []string {
	var files []string
	_ = filepath.WalkDir(filepath.Join(data, "sessions"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
			files = append(files, path)
		}
		return nil
	})
	return files
}
