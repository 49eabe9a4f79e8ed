package e2e_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http/httptest"
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

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/pibot/pibot/adapters/web"
	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// webChromium returns the path of a Chromium binary, skipping the test
// when there is none.
func webChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium binary found (apt-get install -y chromium); skipping the web chat browser test")
	return ""
}

// webPibot is a running pibot serving only the web chat: the real gateway
// and web adapter, a scripted model and one fake tool.
type webPibot struct {
	dir  string
	srv  *httptest.Server
	runs atomic.Int32 // runs of the bash tool
	logs *logBuffer
	// stop stops the gateway and the server (once; the test's cleanup
	// calls it too).
	stop func()
}

// startWebPibot starts the gateway with the web adapter on a fresh data
// directory and serves the adapter's handler. Everything is stopped at the
// end of the test.
func startWebPibot(t *testing.T, script []faux.Turn) *webPibot {
	t.Helper()
	return startWebPibotIn(t, t.TempDir(), "", script)
}

// startWebPibotIn is startWebPibot on the data directory dir, which may
// hold what an earlier pibot wrote, serving on addr ("": any free port).
func startWebPibotIn(t *testing.T, dir, addr string, script []faux.Turn) *webPibot {
	t.Helper()
	p := &webPibot{dir: dir, logs: &logBuffer{}}
	log := slog.New(slog.NewTextHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	model := faux.New(llm.ModelInfo{ID: "m", Provider: "faux", ContextWindow: 100000, MaxTokens: 1000}, script...)
	bash := &agenttest.Tool{Name: "bash", Fn: func(context.Context, string, json.RawMessage, func(llm.ToolOutput)) (llm.ToolOutput, error) {
		p.runs.Add(1)
		return agenttest.TextOutput("3 files"), nil
	}}

	deps, inbox := localDeps(t, p.dir, access.Policy{Owners: []string{string(web.Platform) + ":" + web.UserID}})
	ad, err := web.New(web.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{
		DataDir:         p.dir,
		Model:           "faux/m",
		Workspace:       p.dir,
		Tools:           func(gateway.ToolRun) []agent.Tool { return []agent.Tool{bash} },
		DMApprovals:     map[string]string{"bash": "ask"},
		ApprovalTimeout: 30 * time.Second,
		FinalWait:       10 * time.Second,
		DrainTimeout:    300 * time.Millisecond,
		Logger:          log,
	}, withAdapter(deps, ad, modelSet{model}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	p.srv = httptest.NewUnstartedServer(ad.Handler())
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		p.srv.Listener.Close()
		p.srv.Listener = ln
	}
	p.srv.Start()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("gateway.Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("gateway did not stop")
			}
			p.srv.Close()
			if err := inbox.Close(); err != nil {
				t.Errorf("close inbox: %v", err)
			}
			if t.Failed() {
				t.Logf("logs:\n%s", p.logs.String())
			}
		})
	}
	t.Cleanup(p.stop)
	return p
}

// branchTexts returns "role:text" of the message entries on location
// loc's head branch in the data directory's session files, leaving out
// assistant messages without text (tool calls); nil when no session holds
// loc.
func (p *webPibot) branchTexts(t *testing.T, loc string) []string {
	t.Helper()
	var files []string
	_ = filepath.WalkDir(filepath.Join(p.dir, "sessions"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
			files = append(files, path)
		}
		return nil
	})
	for _, f := range files {
		s, err := session.OpenFile(f, session.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		head, ok := s.Tree().Head(loc)
		if !ok {
			s.Close()
			continue
		}
		b, err := s.Tree().Branch(head)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range b {
			if e.Type == session.TypeMessage && e.Message != nil {
				if txt := string(e.Message.Role) + ":" + e.Message.Text(); txt != "assistant:" {
					out = append(out, txt)
				}
			}
		}
		return out
	}
	return nil
}

// waitBranch waits until location loc's head branch holds want (a
// "role:text" of branchTexts), the session writes may trail what the
// browser shows, and returns the branch.
func (p *webPibot) waitBranch(t *testing.T, loc, want string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := p.branchTexts(t, loc)
		if slices.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("branch of %s lacks %q: %q", loc, want, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// webBrowser drives one headless Chromium tab.
type webBrowser struct {
	t   *testing.T
	ctx context.Context
}

// newWebBrowser starts headless Chromium at execPath for at most timeout,
// with a desktop-sized window; the test's end closes it.
func newWebBrowser(t *testing.T, execPath string, timeout time.Duration) *webBrowser {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(execPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Headless,
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1200, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	return &webBrowser{t: t, ctx: bctx}
}

// eval evaluates js, which must yield a string.
func (b *webBrowser) eval(js string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return s
}

// reload reloads the page and waits until it is connected again. The
// wait polls the new document: chromedp's WaitVisible right after a
// reload could resolve #conn in the old one and fail with "Could not
// find node with given id" when the new one replaced it.
func (b *webBrowser) reload() {
	b.t.Helper()
	b.do(chromedp.Reload())
	deadline := time.Now().Add(15 * time.Second)
	for {
		s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('#conn.ok') ? 'ok' : ''`))
		if err == nil && s == "ok" {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the reloaded page never connected (%v); page: %q", err, b.page())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// do runs chromedp actions.
func (b *webBrowser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v; page: %q", err, b.page())
	}
}

func (b *webBrowser) page() string {
	s, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
	return s
}

// waitJS polls js until it evaluates to a string for which ok holds, and
// returns every distinct value seen on the way (the last one satisfies ok).
func (b *webBrowser) waitJS(what, js string, ok func(string) bool) []string {
	b.t.Helper()
	var seen []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		s := b.eval(js)
		if len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
		if ok(s) {
			return seen
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out waiting for %s; saw %q; page: %q", what, seen, b.page())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFound waits until js evaluates to a non-empty string and returns it.
func (b *webBrowser) waitFound(what, js string) string {
	b.t.Helper()
	seen := b.waitJS(what, js, func(s string) bool { return s != "" })
	return seen[len(seen)-1]
}

// waitContains waits until js evaluates to a string containing sub.
func (b *webBrowser) waitContains(js, sub string) string {
	b.t.Helper()
	seen := b.waitJS(strconv.Quote(sub), js, func(s string) bool { return strings.Contains(s, sub) })
	return seen[len(seen)-1]
}

// JS snippets of the web chat's page structure.
const (
	// jsBotTexts lists the text of every bot message, one per line.
	jsBotTexts = `Array.from(document.querySelectorAll('.msg.bot .body')).map(b => b.textContent).join("\n")`
	// jsVisible lists the visible messages of the current view.
	jsVisible = `Array.from(document.querySelectorAll('.msg')).filter(m => !m.hidden).map(m => m.textContent).join("\n")`
)

// jsBotBody returns the text of the bot message with id, "" if absent.
func jsBotBody(id string) string {
	return `(document.querySelector('.msg.bot[data-id=` + strconv.Quote(id) + `] .body') || {}).textContent || ""`
}

// jsBotWith returns the id of the first bot message whose text contains
// sub, "" if none.
func jsBotWith(sub string) string {
	return `(Array.from(document.querySelectorAll('.msg.bot')).find(m => m.querySelector('.body').textContent.includes(` + strconv.Quote(sub) + `)) || {dataset: {}}).dataset.id || ""`
}

// TestWebChatInBrowser drives the web chat in headless Chromium against
// the real gateway: a streamed reply, an approved tool call, a thread that
// branches from the first answer, and the session tree.
func TestWebChatInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	execPath := webChromium(t)

	first := "First answer: " + words("stream", 60) + " end."
	p := startWebPibot(t, []faux.Turn{
		faux.Text(first).WithDelay(15 * time.Millisecond),
		faux.ToolCalls(faux.Call("call-1", "bash", `{"command":"ls"}`)),
		faux.Text("tool done"),
		faux.Text("branch answer"),
	})

	b := newWebBrowser(t, execPath, 40*time.Second)

	// 1. A message gets a reply that streams in.
	b.do(
		chromedp.Navigate(p.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#conn.ok")),
		chromedp.SendKeys(chromedp.CSS("#input"), "hello"+kb.Enter),
	)
	firstID := b.waitFound("the first reply", jsBotWith("First answer"))
	seen := b.waitJS("the complete first reply", jsBotBody(firstID), func(s string) bool { return strings.TrimSpace(s) == first })
	// Partial texts are strict beginnings of the answer (a live reply ends
	// with a cursor); anything else on the way is wrong.
	var partial []string
	for _, s := range seen {
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "▌"))
		switch {
		case s == "" || s == first:
		case strings.HasPrefix(first, s):
			if !slices.Contains(partial, s) {
				partial = append(partial, s)
			}
		default:
			t.Errorf("partial reply %q is not a beginning of the answer", s)
		}
	}
	if len(partial) < 2 {
		t.Errorf("the reply did not stream: saw %q", seen)
	}
	conv := b.eval(`localStorage.getItem("pibot.conv") || ""`)
	if conv == "" {
		t.Fatal("the page has no conversation id")
	}
	mainLoc := chat.ConvRef{Platform: web.Platform, Channel: conv, DM: true}.Key()

	// 2. A message that makes the model call bash: the approval appears,
	// "Allow once" lets the tool run once, and the answer follows.
	const second = "please list the files"
	b.do(chromedp.SendKeys(chromedp.CSS("#input"), second+kb.Enter))
	const jsApprovalButtons = `Array.from(document.querySelectorAll('.msg.bot .buttons button')).map(b => b.textContent).join(",")`
	b.waitContains(jsApprovalButtons, "Allow once,Allow for this session,Deny")
	approvalID := b.eval(jsBotWith("Approve"))
	if approvalID == "" {
		t.Fatalf("no approval message; bot messages: %q", b.eval(jsBotTexts))
	}
	if got := b.eval(jsBotBody(approvalID)); !strings.Contains(got, "bash") || !strings.Contains(got, "ls") {
		t.Errorf("approval message %q does not name the tool and its command", got)
	}
	if n := p.runs.Load(); n != 0 {
		t.Fatalf("bash ran %d times before approval", n)
	}
	b.do(chromedp.Click(chromedp.Search(`//div[@data-id="` + approvalID + `"]//button[text()="Allow once"]`)))
	b.waitContains(jsBotTexts, "tool done")
	decision := b.waitContains(jsBotBody(approvalID), "allowed once")
	if strings.Contains(decision, "Approve") {
		t.Errorf("approval message still asks after the decision: %q", decision)
	}
	if n := b.eval(`String(document.querySelectorAll('.msg.bot[data-id="` + approvalID + `"] .buttons button').length)`); n != "0" {
		t.Errorf("the decided approval message still has %s buttons", n)
	}
	if n := p.runs.Load(); n != 1 {
		t.Errorf("bash ran %d times, want 1", n)
	}

	// 3. A thread on the first answer branches the session there.
	b.do(
		chromedp.Click(chromedp.CSS(`.msg.bot[data-id="`+firstID+`"] .threadbtn`)),
		chromedp.WaitVisible(chromedp.CSS("#threadhead")),
		chromedp.SendKeys(chromedp.CSS("#input"), "alternative"+kb.Enter),
	)
	b.waitContains(jsVisible, "branch answer")
	if v := b.eval(jsVisible); strings.Contains(v, "tool done") || strings.Contains(v, second) {
		t.Errorf("the thread view shows main-line messages: %q", v)
	}
	thread := b.eval(`(document.querySelector('#threads li.active') || {dataset: {}}).dataset.thread || ""`)
	if thread == "" {
		t.Fatalf("no active thread in the side panel: %q", b.eval(`document.querySelector('#threads').textContent`))
	}
	panel := b.eval(`Array.from(document.querySelectorAll('#threads li')).map(li => li.textContent).join("|")`)
	if !strings.HasPrefix(panel, "Main line|alternative") {
		t.Errorf("the Threads panel does not list the thread on the first answer: %q", panel)
	}

	threadLoc := chat.ConvRef{Platform: web.Platform, Channel: conv, Thread: thread, DM: true}.Key()
	got := p.waitBranch(t, threadLoc, "assistant:branch answer")
	for _, want := range []string{"user:hello", "assistant:" + first, "user:alternative", "assistant:branch answer"} {
		if !slices.Contains(got, want) {
			t.Errorf("thread branch lacks %q: %q", want, got)
		}
	}
	for _, s := range got {
		if strings.Contains(s, second) || strings.Contains(s, "tool done") || strings.HasPrefix(s, string(llm.RoleToolResult)+":") {
			t.Errorf("thread branch holds the second exchange (%q): %q", s, got)
		}
	}
	if i, j := slices.Index(got, "user:hello"), slices.Index(got, "user:alternative"); i < 0 || j < i {
		t.Errorf("thread branch out of order: %q", got)
	}
	if mb := p.waitBranch(t, mainLoc, "assistant:tool done"); slices.Contains(mb, "user:alternative") {
		t.Errorf("main line branch changed by the thread: %q", mb)
	}

	// 4. Back on the main line, the Tree button shows the session tree
	// with both branches.
	b.do(chromedp.Click(chromedp.CSS("#back")), chromedp.Click(chromedp.CSS("#tree")))
	tree := b.eval(jsBotBody(b.waitFound("the session tree", jsBotWith("Session tree"))))
	for _, want := range []string{"hello", second, "alternative"} {
		if !strings.Contains(tree, want) {
			t.Errorf("tree lacks %q: %q", want, tree)
		}
	}
	if n := p.runs.Load(); n != 1 {
		t.Errorf("bash ran %d times in all, want 1", n)
	}

	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp("", "pibot-web-e2e-*.png")
	if err != nil {
		t.Fatal(err)
	}
	_, werr := f.Write(shot)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("screenshot: %s", f.Name())
}
