package web_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/pibot/pibot/adapters/web"
	"github.com/pibot/pibot/chat"
)

// gateway is a tiny stand-in for pibot's gateway: it answers a message by
// streaming a reply through several edits and then asking for approval
// with two buttons; a button press gets a reply; a message in a thread
// gets an echo in that thread.
type gateway struct {
	a *web.Adapter

	mu      sync.Mutex
	ins     []chat.Inbound
	replies []chat.MsgRef // first reply of each main-line message
	errs    []error

	wg sync.WaitGroup
}

var streamSteps = []string{"Hel", "Hello, wor", "Hello, world! Here is", "Hello, world! Here is **bold** and `code`."}

// sink returns the gateway's sink; its replies run until ctx ends.
func (g *gateway) sink(ctx context.Context) chat.Sink {
	return func(_ context.Context, in chat.Inbound) error {
		g.mu.Lock()
		g.ins = append(g.ins, in)
		g.mu.Unlock()
		g.wg.Go(func() { g.answer(ctx, in) })
		return nil
	}
}

func (g *gateway) answer(ctx context.Context, in chat.Inbound) {
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(150 * time.Millisecond):
			return true
		}
	}
	switch {
	case in.Kind == chat.KindAction:
		_, err := g.a.Answer(ctx, *in.Interaction, chat.Answer{Toast: "approved", Replace: &chat.Out{Markdown: "Approved: " + in.Action.Data}})
		if err == nil {
			_, err = g.a.Send(ctx, in.Conv, chat.Out{Markdown: "ran `ls`: 3 files"})
		}
		g.check(ctx, err)
	case in.Command != nil && in.Command.Name == "tree":
		_, err := g.a.Send(ctx, in.Conv, chat.Out{Markdown: "```\n* main\n└─ thread\n```", Buttons: [][]chat.Button{{{ID: "jump:1", Label: "Jump to thread"}}}})
		g.check(ctx, err)
	case in.Conv.Thread != "":
		_, err := g.a.Send(ctx, in.Conv, chat.Out{Markdown: "thread reply: " + in.Text})
		g.check(ctx, err)
	default:
		g.check(ctx, g.a.SetStatus(ctx, in.Conv, "thinking…"))
		if !pause() {
			return
		}
		ref, err := g.a.Send(ctx, in.Conv, chat.Out{Markdown: streamSteps[0]})
		if g.check(ctx, err) {
			return
		}
		g.mu.Lock()
		g.replies = append(g.replies, ref)
		g.mu.Unlock()
		for _, s := range streamSteps[1:] {
			if !pause() || g.check(ctx, g.a.Edit(ctx, ref, chat.Out{Markdown: s})) {
				return
			}
		}
		g.check(ctx, g.a.SetStatus(ctx, in.Conv, ""))
		_, err = g.a.Send(ctx, in.Conv, chat.Out{Markdown: "Run `ls`?", Buttons: [][]chat.Button{{
			{ID: "allow-once", Label: "Allow once", Style: chat.StylePrimary},
			{ID: "deny", Label: "Deny", Style: chat.StyleDanger},
		}}})
		g.check(ctx, err)
	}
}

// check records err (a failed adapter call) and reports whether it was set.
func (g *gateway) check(ctx context.Context, err error) bool {
	if err != nil && ctx.Err() == nil {
		g.mu.Lock()
		g.errs = append(g.errs, err)
		g.mu.Unlock()
	}
	return err != nil
}

func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium binary found (apt-get install -y chromium); skipping the browser test")
	return ""
}

func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	execPath := chromium(t)

	a, err := web.New(web.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gctx, stopGateway := context.WithCancel(context.Background())
	g := &gateway{a: a}
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- a.Run(runCtx, g.sink(gctx)) }()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		stopGateway()
		g.wg.Wait()
		for _, err := range g.errs {
			t.Errorf("gateway: %v", err)
		}
		stopRun()
		if err := <-runDone; err != nil {
			t.Errorf("Run: %v", err)
		}
		srv.Close()
	})

	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(execPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Headless,
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1200, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()

	text := func(js string) string {
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return s
	}
	// waitText polls until js evaluates to a string containing want, and
	// returns every distinct value seen on the way.
	waitText := func(js, want string) []string {
		t.Helper()
		var seen []string
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := text(js)
			if len(seen) == 0 || seen[len(seen)-1] != s {
				seen = append(seen, s)
			}
			if strings.Contains(s, want) {
				return seen
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %q in %s; saw %q; page: %q", want, js, seen, text("document.body.innerText"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// 1. Send a message and watch the reply stream in.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#conn.ok")),
		chromedp.SendKeys(chromedp.CSS("#input"), "hello"+kb.Enter),
	); err != nil {
		t.Fatal(err)
	}
	firstBot := `(document.querySelector('.msg.bot .body') || {}).textContent || ""`
	seen := waitText(firstBot, "Hello, world! Here is bold and code.")
	partial := 0
	for _, s := range seen {
		if s != "" && !strings.Contains(s, "bold") {
			partial++
		}
	}
	if partial < 2 {
		t.Errorf("reply did not stream: saw %q", seen)
	}
	if got := text(`document.querySelector('.msg.bot .body strong').textContent + "|" + document.querySelector('.msg.bot .body code').textContent`); got != "bold|code" {
		t.Errorf("markdown rendering: %q", got)
	}
	if got := text(`document.querySelector('.msg.user .body').textContent`); got != "hello" {
		t.Errorf("own message shows %q", got)
	}

	// 2. Press the approval button.
	waitText(`Array.from(document.querySelectorAll('.msg.bot .buttons button')).map(b => b.textContent).join(",")`, "Allow once,Deny")
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.Search(`//button[text()="Allow once"]`))); err != nil {
		t.Fatal(err)
	}
	waitText(`document.querySelector('.messages').textContent`, "ran ls: 3 files")
	waitText(`document.querySelector('.messages').textContent`, "Approved: allow-once")
	if n := text(`String(document.querySelectorAll('.msg.bot .buttons button').length)`); n != "0" {
		t.Errorf("%s buttons left after the approval replaced the message", n)
	}

	// 3. Start a thread from the first reply and send there.
	g.mu.Lock()
	root := g.replies[0]
	g.mu.Unlock()
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`.msg[data-id="`+root.ID+`"] .threadbtn`)),
		chromedp.WaitVisible(chromedp.CSS("#threadhead")),
		chromedp.SendKeys(chromedp.CSS("#input"), "in thread"+kb.Enter),
	); err != nil {
		t.Fatal(err)
	}
	visible := `Array.from(document.querySelectorAll('.msg')).filter(m => !m.hidden).map(m => m.textContent).join("\n")`
	waitText(visible, "thread reply: in thread")
	if v := text(visible); strings.Contains(v, "ran ls") {
		t.Errorf("thread view shows main-line messages: %q", v)
	}
	panel := text(`Array.from(document.querySelectorAll('#threads li')).map(li => li.textContent).join("|")`)
	if !strings.HasPrefix(panel, "Main line|in thread") {
		t.Errorf("side panel: %q", panel)
	}

	g.mu.Lock()
	var threadIn *chat.Inbound
	for i := range g.ins {
		if g.ins[i].Conv.Thread != "" {
			threadIn = &g.ins[i]
		}
	}
	g.mu.Unlock()
	if threadIn == nil || threadIn.ReplyTo == nil || threadIn.ReplyTo.ID != root.ID || !threadIn.ReplyToBot {
		t.Errorf("thread message did not branch from %s: %+v", root.ID, threadIn)
	}

	// Back to the main line: the thread's messages are hidden again.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#back"))); err != nil {
		t.Fatal(err)
	}
	if v := text(visible); strings.Contains(v, "thread reply") || !strings.Contains(v, "ran ls") {
		t.Errorf("main line view: %q", v)
	}

	// 4. The Tree button sends the /tree command; the answer has buttons.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#tree"))); err != nil {
		t.Fatal(err)
	}
	waitText(`Array.from(document.querySelectorAll('.msg.bot .buttons button')).map(b => b.textContent).join(",")`, "Jump to thread")
	g.mu.Lock()
	last := g.ins[len(g.ins)-1]
	g.mu.Unlock()
	if last.Command == nil || last.Command.Name != "tree" || last.Conv.Thread != "" {
		t.Errorf("Tree button sent %+v", last)
	}

	// 5. The markdown renderer builds safe DOM.
	for _, tt := range []struct{ md, html string }{
		{"<b>x</b> & <script>alert(1)</script>", "<p>&lt;b&gt;x&lt;/b&gt; &amp; &lt;script&gt;alert(1)&lt;/script&gt;</p>"},
		{"[a](javascript:alert(1)) [b](https://x.org/p?q=1)", `<p>a <a href="https://x.org/p?q=1" target="_blank" rel="noopener noreferrer nofollow">b</a></p>`},
		{"see https://a.b/c.", `<p>see <a href="https://a.b/c" target="_blank" rel="noopener noreferrer nofollow">https://a.b/c</a>.</p>`},
		{"```go\nfmt.Println(\"<x>\")\n```", `<pre><code data-lang="go">fmt.Println("&lt;x&gt;")</code></pre>`},
		{"```\nunclosed", "<pre><code>unclosed</code></pre>"},
		{"- a\n- b\n  - c", "<ul><li><p>a</p></li><li><p>b</p><ul><li><p>c</p></li></ul></li></ul>"},
		{"3. x\n4. y", `<ol start="3"><li><p>x</p></li><li><p>y</p></li></ol>`},
		{"**bo", "<p>**bo</p>"},
		{"snake_case_word and *it* ~~del~~ __b__", "<p>snake_case_word and <em>it</em> <del>del</del> <strong>b</strong></p>"},
		{"> quote\n\n## Title\n---", "<blockquote><p>quote</p></blockquote><h2>Title</h2><hr>"},
		{"`a <b>` \\*x\\*", "<p><code>a &lt;b&gt;</code> *x*</p>"},
		{"| a | b |\n|:-|-:|\n| 1 | `x|y` |", `<div class="tablewrap"><table><thead><tr><th class="align-left">a</th><th class="align-right">b</th></tr></thead><tbody><tr><td class="align-left">1</td><td class="align-right"><code>x|y</code></td></tr></tbody></table></div>`},
		{"| a \\| b |\n|---|\n| **c** |\n\nafter", `<div class="tablewrap"><table><thead><tr><th>a | b</th></tr></thead><tbody><tr><td><strong>c</strong></td></tr></tbody></table></div><p>after</p>`},
		{"text before\n| h |\n| - |\n| <img src=x onerror=alert(1)> |", `<p>text before</p><div class="tablewrap"><table><thead><tr><th>h</th></tr></thead><tbody><tr><td>&lt;img src=x onerror=alert(1)&gt;</td></tr></tbody></table></div>`},
		{"a | b\nnot a table", "<p>a | b\nnot a table</p>"},
		{"| a | b |\n|---|\n| 1 | 2 |", "<p>| a | b |\n|---|\n| 1 | 2 |</p>"},
	} {
		js := fmt.Sprintf(`(() => { const d = document.createElement("div"); d.appendChild(window.pibotMarkdown.render(%q)); return d.innerHTML; })()`, tt.md)
		if got := text(js); got != tt.html {
			t.Errorf("render %q:\n got %s\nwant %s", tt.md, got, tt.html)
		}
	}

	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(screenshotDir(t), "desktop-chat.png")
	if err := os.WriteFile(p, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}
