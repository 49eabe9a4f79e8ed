package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"
	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
)

// A crash-point world is one conversation through the real binary built
// with the crashpoints tag (internal/crashpoint): a fake Telegram Bot API,
// the script model over SSE, a data directory and a workspace, and one
// pibot (Telegram polling) or, in cluster mode, two replicas on the real
// Redis under a private key prefix (Telegram webhooks, each delivered to
// a live replica as a load balancer would). pibot starts armed at one
// point, dies there, and is started again unarmed; the conversation goes
// on until every message is answered.

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
	dir   string // holds data/, ws/ and the configs
	data  string
	ws    string
	srv   *telegramtest.Server
	model *scriptModel
	// procs are the pibot processes: one, or two replicas in cluster
	// mode (nil until started).
	procs []*cpProc
	// redis and prefix are the cluster's (nil: not cluster mode).
	redis   *redis.Client
	prefix  string
	nextUpd atomic.Int64
	// asked are the ids of the questions sent, in order.
	asked []string
	// crash is what the armed process left: its log, the newest bot
	// message when it died (the one post the documented window allows
	// twice) and the session file.
	crash *cpCrash
	logs  []string
	// users may write to the bot (owners); the first is cpUser.
	users []models.User
	// env is added to the environment of every start ("K=V").
	env []string
}

// cpProc is one pibot process of a world (restarted on the same address
// and config, so a replica keeps its identity).
type cpProc struct {
	p      *crashPibot
	cfg    string
	addr   string
	killed bool // by the test, not at a crash point
}

// cpCrash is what is known of the moment the armed process died.
type cpCrash struct {
	log  string
	file string // the session file as the crash left it ("" if none or several)
	// files are every session file as the crash left them, by path.
	files map[string]string
	// newest is the newest bot message of each chat when pibot died.
	newest map[int64]telegramtest.Message
	// inboxHeld counts the items the embedded inbox file held (0 in
	// cluster mode).
	inboxHeld int
	// compactCarried counts the items a compaction of the embedded inbox
	// carried over (cpCompactCarried; 0 in cluster mode).
	compactCarried int
}

// newCPWorld makes a world of one pibot, or of two replicas with cluster;
// nothing is started yet.
// Besides cpUser, the users others may write too.
func newCPWorld(t *testing.T, bin string, cluster bool, others ...models.User) *cpWorld {
	t.Helper()
	w := &cpWorld{t: t, bin: bin, dir: t.TempDir(), srv: telegramtest.New(cpToken), model: newScriptModel(t, true),
		users: append([]models.User{cpUser}, others...)}
	t.Cleanup(w.srv.Close)
	for _, u := range w.users {
		w.srv.AddChat(models.Chat{ID: u.ID, Type: models.ChatTypePrivate, FirstName: u.FirstName})
	}
	w.data, w.ws = filepath.Join(w.dir, "data"), filepath.Join(w.dir, "ws")
	if err := os.MkdirAll(w.ws, 0o700); err != nil {
		t.Fatal(err)
	}
	n := 1
	if cluster {
		n = 2
		w.redis = redis.NewClient(&redis.Options{Addr: clusterRedis})
		if err := w.redis.Ping(t.Context()).Err(); err != nil {
			w.redis.Close()
			t.Skipf("no redis-server on %s: %v", clusterRedis, err)
		}
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		w.prefix = "pibot-e2e-cp-" + hex.EncodeToString(rnd[:]) + ":"
		t.Cleanup(func() {
			if keys, _ := w.redis.Keys(t.Context(), w.prefix+"*").Result(); len(keys) > 0 {
				w.redis.Del(t.Context(), keys...)
			}
			w.redis.Close()
		})
	}
	for i := range n {
		pr := &cpProc{addr: crashFreeAddr(t), cfg: filepath.Join(w.dir, fmt.Sprintf("pibot%d.yaml", i))}
		if err := os.WriteFile(pr.cfg, []byte(w.config(pr.addr)), 0o600); err != nil {
			t.Fatal(err)
		}
		w.procs = append(w.procs, pr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, pr := range w.procs {
				if pr.p != nil {
					w.logs = append(w.logs, pr.p.stderr.String())
				}
			}
			t.Logf("pibot's logs:\n%s", strings.Join(w.logs, "\n--- next process ---\n"))
			t.Logf("bot messages:\n%s", w.said())
		}
	})
	return w
}

// config is the configuration of the process listening on addr.
func (w *cpWorld) config(addr string) string {
	tg := ""
	cluster := ""
	if w.redis != nil {
		tg = "\n    mode: webhook\n    webhook_url: https://bot.example.invalid/hook\n    webhook_secret: " + clusterSecret
		cluster = fmt.Sprintf("cluster:\n  redis_url: redis://%s/0\n  key_prefix: %q\n  lease_ttl: %dms\n  secret: %q\n", clusterRedis, w.prefix, clusterLeaseMs, "test cluster secret, 32 bytes at least")
	}
	var owners []string
	for _, u := range w.users {
		owners = append(owners, fmt.Sprintf("%q", "telegram:"+strconv.FormatInt(u.ID, 10)))
	}
	return fmt.Sprintf(`data_dir: %s
http:
  listen: %s
%saccess:
  owners: [%s]
adapters:
  telegram:
    token: %q
    api_url: %q%s
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
`, w.data, addr, cluster, strings.Join(owners, ", "), cpToken, w.srv.URL, tg, w.model.URL, w.ws)
}

// start starts process i, armed at spec ("" for none).
func (w *cpWorld) start(i int, spec string) {
	w.t.Helper()
	env := append([]string(nil), w.env...)
	if spec != "" {
		env = append(env, "PIBOT_CRASHPOINT="+spec)
	}
	pr := w.procs[i]
	if pr.p != nil {
		w.logs = append(w.logs, pr.p.stderr.String())
	}
	pr.p, pr.killed = crashStartEnv(w.t, w.bin, pr.cfg, w.dir, pr.addr, env), false
	pr.addr = strings.TrimPrefix(pr.p.base, "http://")
}

// kill ends process i with SIGKILL (the test's doing, not a crash point).
func (w *cpWorld) kill(i int) {
	w.procs[i].killed = true
	w.procs[i].p.kill()
}

// alive reports whether process i runs.
func (w *cpWorld) alive(i int) bool {
	pr := w.procs[i]
	if pr.p == nil {
		return false
	}
	select {
	case <-pr.p.exited:
		return false
	default:
		return true
	}
}

// ask sends a user message naming itself id (its text starts "id:"; a
// command's arguments do): queued for polling, or delivered to a live
// replica's webhook until one takes it (2xx), as Telegram does.
func (w *cpWorld) ask(id, text string) {
	w.t.Helper()
	w.asked = append(w.asked, id)
	if w.redis == nil {
		w.srv.AddText(cpChat, cpUser, text)
		return
	}
	up := models.Update{ID: w.nextUpd.Add(1), Message: w.srv.UserMessage(cpChat, cpUser, text)}
	body, _ := json.Marshal(up)
	sum := sha256.Sum256([]byte("pibot telegram webhook path\x00" + clusterSecret))
	deadline := time.Now().Add(60 * time.Second)
	for {
		for i, pr := range w.procs {
			if !w.alive(i) {
				continue
			}
			req, _ := http.NewRequest(http.MethodPost, pr.p.base+"/telegram/"+hex.EncodeToString(sum[:16]), bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", clusterSecret)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					return
				}
			}
		}
		w.checkExits()
		if time.Now().After(deadline) {
			w.t.Fatalf("no replica took %s's webhook delivery", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// until waits for cond and reports true; or, if the armed process dies
// meanwhile, records the crash, starts pibot again unarmed and reports
// false.
func (w *cpWorld) until(what string, cond func() bool) bool {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if w.checkExits() {
			return false
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// checkExits handles a process that died at its crash point: the crash is
// recorded and every process not running (the dead one, one the test
// killed, one not started yet) starts, unarmed. It reports whether it
// found one.
func (w *cpWorld) checkExits() bool {
	w.t.Helper()
	for i, pr := range w.procs {
		if pr.p == nil || pr.killed || w.alive(i) {
			continue
		}
		log := pr.p.stderr.String()
		if w.crash != nil {
			w.t.Fatalf("pibot died again after the crash:\n%s", log)
		}
		w.crash = &cpCrash{log: log, files: map[string]string{}}
		if w.redis == nil {
			w.crash.inboxHeld = cpInboxPending(w.data)
			w.crash.compactCarried = cpCompactCarried(w.data)
		}
		files := sessionFiles(w.data)
		for _, f := range files {
			b, _ := os.ReadFile(f)
			w.crash.files[f] = string(b)
		}
		if len(files) == 1 {
			w.crash.file = w.crash.files[files[0]]
		}
		w.crash.newest = map[int64]telegramtest.Message{}
		for _, u := range w.users {
			if msgs := w.srv.Messages(u.ID); len(msgs) > 0 {
				w.crash.newest[u.ID] = msgs[len(msgs)-1]
			}
		}
		for j := range w.procs {
			if !w.alive(j) {
				w.start(j, "")
			}
		}
		return true
	}
	return false
}

// settle waits until every question asked is answered, Telegram has no
// update left to hand over, the inbox is empty and no reply is journaled
// as streaming. A message that is still unanswered when everything has
// been quiet for 5 s (nothing pending anywhere) was lost: the test says so
// then.
func (w *cpWorld) settle() {
	w.t.Helper()
	var quiet time.Time
	settled := func() bool {
		missing := w.unanswered()
		idle := w.srv.Pending() == 0 && w.inboxPending() == 0
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
		if markCount(said, "END-"+id) == 0 {
			missing = append(missing, id)
		}
	}
	return missing
}

// inboxPending counts the inbox items not acknowledged nor set aside.
func (w *cpWorld) inboxPending() int {
	if w.redis == nil {
		return cpInboxPending(w.data)
	}
	n, err := w.redis.ZCard(w.t.Context(), w.prefix+"{inbox}:keys").Result()
	if err != nil {
		return 1
	}
	return int(n)
}

// quarantined counts the items set aside.
func (w *cpWorld) quarantined() int {
	if w.redis == nil {
		return cpQuarantined(w.data)
	}
	n, _ := w.redis.LLen(w.t.Context(), w.prefix+"{inbox}:q").Result()
	return int(n)
}

// stop stops every running process with SIGTERM.
func (w *cpWorld) stop() {
	for i, pr := range w.procs {
		if w.alive(i) {
			pr.p.stop()
			w.logs = append(w.logs, pr.p.stderr.String())
		}
	}
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
