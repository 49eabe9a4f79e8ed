package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/adapters/telegram"
	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// botToken is the token of the bot under test; its secret half must never
// reach a log line.
const botToken = "7000001:E2eSecretPart_DoNotLog-9xQ"

// botName is the fake's default username for the bot.
const botName = "pibot_test_bot"

var (
	// owner is the bot's owner; its private chat has the same id.
	owner = models.User{ID: 1001, FirstName: "Olga", Username: "olga"}
	// bob is a group member who is not an owner.
	bob = models.User{ID: 2002, FirstName: "Bob", Username: "bob"}
)

const (
	ownerChat int64 = 1001
	groupChat int64 = -2001
	forumChat int64 = -1003000000001
)

// modelSet serves one faux model as "faux/m".
type modelSet struct{ m llm.Model }

func (ms modelSet) Model(ref string) (llm.Model, error) {
	if ref != "faux/m" {
		return nil, fmt.Errorf("e2e: unknown model %s", ref)
	}
	return ms.m, nil
}

// logBuffer collects every log line of a world, safe for concurrent
// writers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// world is one bot deployment: a fake Bot API, a data directory and a
// scripted model. They outlive the pibot process that serves them, so a
// test can restart pibot (a new Gateway and a new telegram.Adapter) on
// the same state.
type world struct {
	t       testing.TB
	srv     *telegramtest.Server
	proxy   *proxy // nil unless withProxy
	dir     string
	model   *faux.Model
	tools   []agent.Tool
	policy  access.Policy
	cfgMod  func(*gateway.Config)
	logs    *logBuffer
	log     *slog.Logger
	noStart bool
	// timed, when set, serves the model and records request times.
	timed *timedModel

	proc *process
}

// process is one running pibot: gateway plus Telegram adapter.
type process struct {
	cancel context.CancelFunc
	done   chan error
	inbox  *cluster.LocalInbox
}

type option func(*world)

func withTools(ts ...agent.Tool) option         { return func(w *world) { w.tools = ts } }
func withConfig(f func(*gateway.Config)) option { return func(w *world) { w.cfgMod = f } }
func withProxy() option                         { return func(w *world) { w.proxy = &proxy{} } }

// withNoStart leaves starting pibot to the test (to set up faults first).
func withNoStart() option { return func(w *world) { w.noStart = true } }

// newWorld starts a fake Bot API and pibot on a fresh data directory. At
// the end of the test it stops pibot and checks the invariants of every
// run: no call arrived before a retry_after expired, and no log line holds
// the token.
func newWorld(t testing.TB, script []faux.Turn, opts ...option) *world {
	t.Helper()
	w := &world{
		t:     t,
		dir:   t.TempDir(),
		model: faux.New(llm.ModelInfo{ID: "m", Provider: "faux", ContextWindow: 100000, MaxTokens: 1000}, script...),
		policy: access.Policy{
			Owners:          []string{"telegram:" + strconv.FormatInt(owner.ID, 10)},
			DMPolicy:        "pairing",
			MentionRequired: true,
			Groups:          []string{"telegram:" + strconv.FormatInt(groupChat, 10), "telegram:" + strconv.FormatInt(forumChat, 10)},
		},
		logs: &logBuffer{},
	}
	for _, o := range opts {
		o(w)
	}
	w.log = slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.srv = telegramtest.New(botToken)
	t.Cleanup(w.srv.Close)
	if w.proxy != nil {
		w.proxy.start(t, w.srv.URL)
	}
	if !w.noStart {
		w.start()
	}
	t.Cleanup(func() {
		w.stop()
		if v := w.srv.Violations(); len(v) > 0 {
			t.Errorf("calls arrived before retry_after expired: %q", v)
		}
		assertNoToken(t, w.logs.String())
		if t.Failed() || testing.Verbose() {
			t.Logf("logs:\n%s", w.logs.String())
			t.Logf("Bot API calls:\n%s", w.callLog())
		}
	})
	return w
}

// apiURL is the Bot API base URL the adapter talks to.
func (w *world) apiURL() string {
	if w.proxy != nil {
		return w.proxy.srv.URL
	}
	return w.srv.URL
}

// localDeps opens the embedded cluster pieces of a pibot data dir (inbox,
// fence counter, pairing store) the way `pibot serve` does; the caller adds
// adapters and models and closes the inbox.
func localDeps(t testing.TB, dir string, policy access.Policy) (gateway.Deps, *cluster.LocalInbox) {
	t.Helper()
	inbox, err := cluster.OpenInbox(filepath.Join(dir, "inbox.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	locker, err := cluster.NewLocker(dir)
	if err != nil {
		t.Fatal(err)
	}
	store, err := access.OpenStore(filepath.Join(dir, "pairing.json"))
	if err != nil {
		t.Fatal(err)
	}
	return gateway.Deps{Access: access.NewChecker(policy, store), Inbox: inbox, Dedupe: cluster.NewDedupe(time.Hour, 1000), Locker: locker}, inbox
}

// withAdapter completes deps with one adapter and the models.
func withAdapter(deps gateway.Deps, ad chat.Adapter, m gateway.Models) gateway.Deps {
	deps.Adapters, deps.Models = []chat.Adapter{ad}, m
	return deps
}

// start runs a new pibot process on the world's state.
func (w *world) start() {
	t := w.t
	t.Helper()
	deps, inbox := localDeps(t, w.dir, w.policy)
	ad, err := telegram.New(telegram.Config{
		Token:       secret.New(botToken),
		APIURL:      w.apiURL(),
		PollTimeout: time.Second,
		Logger:      w.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.run(deps, inbox, ad)
}

// run starts a pibot process on the world's state with adapter ad over
// deps and inbox: the gateway configuration every world shares, with
// cfgMod applied, and the timed model when there is one.
func (w *world) run(deps gateway.Deps, inbox *cluster.LocalInbox, ad chat.Adapter) {
	w.t.Helper()
	cfg := gateway.Config{
		DataDir:         w.dir,
		Model:           "faux/m",
		Workspace:       w.dir,
		Tools:           func(gateway.ToolRun) []agent.Tool { return w.tools },
		ApprovalTimeout: 30 * time.Second,
		CollectDebounce: 100 * time.Millisecond,
		FinalWait:       15 * time.Second,
		DrainTimeout:    300 * time.Millisecond,
		Logger:          w.log,
	}
	if w.cfgMod != nil {
		w.cfgMod(&cfg)
	}
	var m llm.Model = w.model
	if w.timed != nil {
		m = w.timed
	}
	g, err := gateway.New(cfg, withAdapter(deps, ad, modelSet{m}))
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{cancel: cancel, done: make(chan error, 1), inbox: inbox}
	go func() { p.done <- g.Run(ctx) }()
	w.proc = p
}

// stop stops the running pibot process, as SIGTERM would.
func (w *world) stop() {
	p := w.proc
	if p == nil {
		return
	}
	w.proc = nil
	p.cancel()
	select {
	case err := <-p.done:
		if err != nil {
			w.t.Errorf("gateway.Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		w.t.Error("gateway did not stop")
	}
	if err := p.inbox.Close(); err != nil {
		w.t.Errorf("close inbox: %v", err)
	}
}

// restart stops pibot and starts a new process on the same data directory
// and the same fake Bot API.
func (w *world) restart() {
	w.t.Helper()
	w.stop()
	w.start()
}

// say delivers a text message from a user, after mods changed it (reply,
// topic), and returns it.
func (w *world) say(chatID int64, from models.User, text string, mods ...func(*models.Message)) *models.Message {
	m := w.srv.UserMessage(chatID, from, text)
	for _, f := range mods {
		f(m)
	}
	w.srv.AddMessage(m)
	return m
}

// replyingTo makes a message a reply to the bot's message id in its chat.
func (w *world) replyingTo(id int) func(*models.Message) {
	return func(m *models.Message) {
		r := w.srv.BotMessage(m.Chat.ID, id)
		if r == nil {
			w.t.Fatalf("no bot message %d in chat %d", id, m.Chat.ID)
		}
		m.ReplyToMessage = r
	}
}

// inTopic makes a message a forum topic message, replying (as Telegram
// does) to the topic's first message.
func inTopic(thread int) func(*models.Message) {
	return func(m *models.Message) {
		m.MessageThreadID, m.IsTopicMessage = thread, true
		m.ReplyToMessage = &models.Message{ID: thread, Chat: m.Chat, MessageThreadID: thread,
			ForumTopicCreated: &models.ForumTopicCreated{Name: "topic"}}
	}
}

// waitFor polls cond until it holds, failing the test after 20 s.
func (w *world) waitFor(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// never fails the test if cond becomes true within d.
func (w *world) never(what string, d time.Duration, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			w.t.Fatalf("unexpected: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitMessage waits until a visible bot message in chatID contains sub and
// returns it.
func (w *world) waitMessage(chatID int64, sub string) telegramtest.Message {
	w.t.Helper()
	var found telegramtest.Message
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, m := range w.srv.Messages(chatID) {
			if strings.Contains(m.Text, sub) {
				found = m
			}
		}
		if found.ID != 0 {
			return found
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("no bot message with %q in chat %d; messages: %q", sub, chatID, texts(w.srv.Messages(chatID)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// withText returns the bot messages in chatID whose text contains sub.
func (w *world) withText(chatID int64, sub string) []telegramtest.Message {
	var out []telegramtest.Message
	for _, m := range w.srv.Messages(chatID) {
		if strings.Contains(m.Text, sub) {
			out = append(out, m)
		}
	}
	return out
}

func texts(ms []telegramtest.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return out
}

// locKey is the gateway's location key of a Telegram chat or forum topic.
func locKey(chatID int64, thread int) string {
	c := chat.ConvRef{Platform: "telegram", Channel: strconv.FormatInt(chatID, 10)}
	if thread != 0 {
		c.Thread = strconv.Itoa(thread)
	}
	return c.Key()
}

// msgKey is the session's key of a Telegram message.
func msgKey(chatID int64, thread, id int) string {
	return locKey(chatID, thread) + "#" + strconv.Itoa(id)
}

// sessionFiles lists the session files of the data directory.
func (w *world) sessionFiles() []string {
	var out []string
	_ = filepath.WalkDir(filepath.Join(w.dir, "sessions"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			out = append(out, p)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// openSession opens a session file read-only.
func (w *world) openSession(path string) *session.Session {
	w.t.Helper()
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// head returns the session file holding location loc and its head entry;
// "" when no session holds it.
func (w *world) head(loc string) (path, head string) {
	w.t.Helper()
	for _, p := range w.sessionFiles() {
		if fi, err := os.Stat(p); err == nil && fi.Size() == 0 {
			// Being created: empty for the instant between the create
			// and its one write (session.FileStorage.Create).
			continue
		}
		s := w.openSession(p)
		h, ok := s.Tree().Head(loc)
		s.Close()
		if ok {
			return p, h
		}
	}
	return "", ""
}

// branch returns "role:text" of the message entries on location loc's
// head branch, leaving out assistant messages without text (tool calls).
func (w *world) branch(loc string) []string {
	w.t.Helper()
	path, head := w.head(loc)
	if path == "" {
		return nil
	}
	s := w.openSession(path)
	defer s.Close()
	b, err := s.Tree().Branch(head)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range b {
		if e.Type == session.TypeMessage && e.Message != nil {
			if t := string(e.Message.Role) + ":" + e.Message.Text(); t != "assistant:" {
				out = append(out, t)
			}
		}
	}
	return out
}

// waitBranch waits until loc's head branch is want.
func (w *world) waitBranch(loc string, want []string) {
	w.t.Helper()
	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		if got = w.branch(loc); slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("branch of %s = %q, want %q", loc, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requestTexts returns "role:text" of the messages of a model request,
// leaving out assistant messages without text.
func requestTexts(r llm.Request) []string {
	var out []string
	for _, m := range r.Messages {
		if t := string(m.Role) + ":" + m.Text(); t != "assistant:" {
			out = append(out, t)
		}
	}
	return out
}

// words returns a text of n numbered words.
func words(prefix string, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = prefix + strconv.Itoa(i+1)
	}
	return strings.Join(ws, " ")
}

// gate is a tool that blocks until released, counting its runs.
type gate struct {
	started chan string
	release chan struct{}
	runs    atomic.Int32
}

func newGate() *gate { return &gate{started: make(chan string, 16), release: make(chan struct{})} }

func (g *gate) tool(name string) *agenttest.Tool {
	return &agenttest.Tool{Name: name, Fn: func(ctx context.Context, id string, _ json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		g.runs.Add(1)
		g.started <- id
		select {
		case <-g.release:
			return agenttest.TextOutput("done " + id), nil
		case <-ctx.Done():
			return llm.ToolOutput{}, fmt.Errorf("e2e: tool %s: %w", id, ctx.Err())
		}
	}}
}

// assertNoToken fails if logs hold the bot token, its secret half, or a
// URL-escaped form of it.
func assertNoToken(t testing.TB, logs string) {
	t.Helper()
	secretHalf := botToken[strings.IndexByte(botToken, ':')+1:]
	for _, form := range []string{botToken, secretHalf, url.PathEscape(botToken), url.QueryEscape(botToken)} {
		if strings.Contains(logs, form) {
			for _, line := range strings.Split(logs, "\n") {
				if strings.Contains(line, form) {
					t.Errorf("a log line holds the bot token: %s", line)
				}
			}
			return
		}
	}
}

// proxy stands between the adapter and the fake Bot API. When armed it
// lets one batch of updates through and then answers every later
// getUpdates with 502 without forwarding it, so the fake never learns the
// next offset: the state of a process that crashed after taking updates
// but before confirming them.
type proxy struct {
	srv   *httptest.Server
	armed atomic.Bool
	// blocking is set once a batch went through while armed.
	blocking atomic.Bool

	mu     sync.Mutex
	served map[int64]int // update_id -> times served
}

func (p *proxy) start(t testing.TB, target string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p.served = map[int64]int{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = p.inspect
	rp.ErrorLog = log.New(io.Discard, "", 0) // a poll cancelled by a stop is no news
	p.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/getUpdates") && p.blocking.Load() {
			rw.WriteHeader(http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(p.srv.Close)
}

// inspect counts the updates of a getUpdates answer and, when armed,
// starts blocking after the first non-empty batch.
func (p *proxy) inspect(resp *http.Response) error {
	if !strings.HasSuffix(resp.Request.URL.Path, "/getUpdates") {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var a struct {
		Result []struct {
			UpdateID int64 `json:"update_id"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &a) != nil || len(a.Result) == 0 {
		return nil
	}
	p.mu.Lock()
	for _, u := range a.Result {
		p.served[u.UpdateID]++
	}
	p.mu.Unlock()
	if p.armed.Load() {
		p.blocking.Store(true)
	}
	return nil
}

// timesServed returns how often an update was handed out.
func (p *proxy) timesServed(id int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served[id]
}

func itoa(n int) string { return strconv.Itoa(n) }

// callLog lists every Bot API call but getUpdates, a line each.
func (w *world) callLog() string {
	var b strings.Builder
	var start time.Time
	for _, c := range w.srv.Calls() {
		if start.IsZero() {
			start = c.Time
		}
		if c.Method == "getUpdates" {
			continue
		}
		fmt.Fprintf(&b, "%8s %s %d", c.Time.Sub(start).Round(time.Millisecond), c.Method, c.Code)
		for _, k := range []string{"chat_id", "message_id", "message_thread_id", "callback_query_id", "text"} {
			if v, ok := c.Params[k]; ok {
				fmt.Fprintf(&b, " %s=%.60q", k, v)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// loopbackAddr returns a loopback address free a moment ago, on a port
// outside the kernel's ephemeral range (32768-60999 by default): a port
// from that range can be handed to another socket (a parallel test's
// listener or connection) in the instant before pibot binds it.
func loopbackAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		addr := "127.0.0.1:" + strconv.Itoa(20000+rand.IntN(12000))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		return addr
	}
	t.Fatal("no free port in 20000-31999")
	return ""
}

// served is a `pibot serve` that serveReady started.
type served struct {
	base string        // http://127.0.0.1:PORT
	cmd  *exec.Cmd     // the process, for signals
	out  *lockedBuffer // its stdout and stderr
	stop func()        // interrupts it and waits for it to end (once)
}

// serveReady starts `pibot serve -c pibot.yaml` of bin in dir on a free
// loopback port and waits until /readyz says ok. It is stopped at the
// test's cleanup, if not before; its output is logged when the test
// failed.
func serveReady(t *testing.T, bin, dir string) *served {
	t.Helper()
	addr := loopbackAddr(t)
	s := &served{base: "http://" + addr, out: &lockedBuffer{}}
	s.cmd = exec.Command(bin, "serve", "-c", "pibot.yaml", "--listen", addr)
	s.cmd.Dir = dir
	s.cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			_ = s.cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = s.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = s.cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("pibot output:\n%s", s.out.String())
			}
		})
	}
	t.Cleanup(s.stop)
	waitUntil(t, "pibot ready", 30*time.Second, func() bool {
		resp, err := http.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}
