package web_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/pibot/pibot/adapters/web"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
)

// screenshotDir is where browser tests write their screenshots:
// $PIBOT_SCREENSHOTS when set, else the test's artifact directory (kept
// with go test -artifacts).
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("PIBOT_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.ArtifactDir()
}

// historyGateway stands in for the gateway behind a web chat with
// history: "go" starts a run that shows a status line until /stop; a press
// of the jump button moves the main line onto the thread's branch (the
// history then says so: the main line shows its first exchange and the
// thread's messages, the second exchange is elsewhere) and answers like
// the gateway's /tree jump.
type historyGateway struct {
	a    *web.Adapter
	hist *chattest.History
	c1   chat.ConvSummary
	t1   chat.Transcript

	mu   sync.Mutex
	ins  []chat.Inbound
	errs []error
	wg   sync.WaitGroup
}

func (g *historyGateway) sink(ctx context.Context) chat.Sink {
	return func(_ context.Context, in chat.Inbound) error {
		g.mu.Lock()
		g.ins = append(g.ins, in)
		g.mu.Unlock()
		g.wg.Go(func() { g.answer(ctx, in) })
		return nil
	}
}

func (g *historyGateway) answer(ctx context.Context, in chat.Inbound) {
	var err error
	switch {
	case in.Kind == chat.KindAction:
		tr := g.t1
		tr.Messages = append([]chat.HistoryMessage(nil), tr.Messages[:2]...)
		for _, m := range g.t1.Messages[4:] {
			m.Thread, m.Moved, m.Origin = "", true, "t1"
			tr.Messages = append(tr.Messages, m)
		}
		tr.Messages = append(tr.Messages, g.t1.Messages[4:]...)
		tr.Elsewhere = []string{"b0-2", "u-q2"}
		g.hist.Add(g.c1, tr)
		_, err = g.a.Answer(ctx, *in.Interaction, chat.Answer{Toast: "Moved.", Reply: &chat.Out{Markdown: "🌿 Now on the branch at: _planets_."}})
	case in.Command != nil && in.Command.Name == "stop":
		if err = g.a.SetStatus(ctx, in.Conv, ""); err == nil {
			_, err = g.a.Send(ctx, in.Conv, chat.Out{Markdown: "Stopped."})
		}
	case in.Command != nil && in.Command.Name == "tree":
		_, err = g.a.Send(ctx, in.Conv, chat.Out{Markdown: "Session tree", Buttons: [][]chat.Button{{{ID: "tj:1", Label: "which one has rings?"}}}})
	case in.Text == "go":
		err = g.a.SetStatus(ctx, in.Conv, "running bash…")
	case in.Text == "one more":
		err = g.a.SetStatus(ctx, in.Conv, "1 queued message(s)")
	}
	if err != nil && ctx.Err() == nil {
		g.mu.Lock()
		g.errs = append(g.errs, err)
		g.mu.Unlock()
	}
}

func (g *historyGateway) last() chat.Inbound {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ins) == 0 {
		return chat.Inbound{}
	}
	return g.ins[len(g.ins)-1]
}

// TestBrowserHistoryStatusAndPhone drives the web chat in headless
// Chromium at desktop and phone widths: past conversations are listed and
// reopened from their sessions (main line, threads, a table), a thread is
// named after the user's question and marked on the message it hangs off,
// the status line counts seconds and its Stop button sends /stop (without
// posting it), the Tree button opens the tree (without posting /tree), a
// tree jump onto the thread's branch shows what the model will see there
// (and the thread keeps its own messages), and at 390 px the threads
// panel is a drawer. Screenshots go to screenshotDir.
func TestBrowserHistoryStatusAndPhone(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	execPath := chromium(t)
	shots := screenshotDir(t)

	a, err := web.New(web.Config{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	c1 := chat.ConvRef{Platform: web.Platform, Channel: "c1", DM: true}
	g := &historyGateway{a: a, hist: chattest.NewHistory(web.Platform)}
	g.c1 = chat.ConvSummary{Conv: c1, Title: "compare the planets", Updated: at, Messages: 4}
	g.t1 = chat.Transcript{
		Messages: []chat.HistoryMessage{
			{ID: "u-q1", Text: "compare the planets", Time: at},
			{ID: "b0-1", FromBot: true, Text: "🔧 `bash` ls\n\n| planet | moons |\n|:--|--:|\n| Mars | 2 |\n| Earth | 1 |", Time: at},
			{ID: "u-q2", Text: "and the sun?", Time: at},
			{ID: "b0-2", FromBot: true, Text: "a star", Time: at},
			{ID: "u-t1", Thread: "t1", Text: "which one has rings?", Time: at},
			{ID: "b0-3", FromBot: true, Thread: "t1", Text: "Saturn", Time: at},
		},
		Threads: []chat.HistoryThread{{ID: "t1", Root: "b0-1", Title: "which one has rings?"}},
	}
	g.hist.Add(g.c1, g.t1)
	g.hist.Add(chat.ConvSummary{Conv: chat.ConvRef{Platform: web.Platform, Channel: "c0"}, Title: "an older chat", Updated: at.Add(-time.Hour), Messages: 2},
		chat.Transcript{Messages: []chat.HistoryMessage{{ID: "u-o1", Text: "old question"}, {ID: "b0-0", FromBot: true, Text: "old answer"}}})
	a.UseHistory(g.hist)

	gctx, stopGateway := context.WithCancel(context.Background())
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

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
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

	eval := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return s
	}
	do := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("browser: %v; page: %q", err, eval("document.body.innerText"))
		}
	}
	wait := func(what, js string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := eval(js)
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: last %q; page: %q", what, s, eval("document.body.innerText"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	num := func(s string) int {
		t.Helper()
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("not a number: %q", s)
		}
		return n
	}
	has := func(sub string) func(string) bool { return func(s string) bool { return strings.Contains(s, sub) } }
	shoot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(shots, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	const visible = `Array.from(document.querySelectorAll('.msg')).filter(m => !m.hidden).map(m => m.querySelector('.body').textContent).join("\n")`
	const convList = `Array.from(document.querySelectorAll('#convs li')).map(li => li.dataset.conv + ":" + li.textContent).join("|")`

	// 1. A fresh page lists the past conversations; one click reopens one,
	// rebuilt from its session.
	do(chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#conn.ok")))
	wait("the conversation list", convList, has("c1:compare the planets"))
	if l := eval(convList); !strings.Contains(l, "c0:an older chat") || strings.Index(l, "c1:compare the planets") > strings.Index(l, "c0:an older chat") {
		t.Errorf("conversations, most recent first: %q", l)
	}
	do(chromedp.Click(chromedp.CSS(`#convs li[data-conv="c1"]`)))
	wait("the rebuilt main line", visible, has("a star"))
	if v := eval(visible); !strings.Contains(v, "compare the planets") || strings.Contains(v, "Saturn") {
		t.Errorf("main line view: %q", v)
	}
	if got := eval(`localStorage.getItem("pibot.conv")`); got != "c1" {
		t.Errorf("reopened conversation not remembered: %q", got)
	}
	// The table is a table, aligned as its delimiter row says.
	if got := eval(`Array.from(document.querySelectorAll('.msg[data-id="b0-1"] table th, .msg[data-id="b0-1"] table td')).map(c => c.textContent + (c.className ? "/" + c.className : "")).join(",")`); got != "planet/align-left,moons/align-right,Mars/align-left,2/align-right,Earth/align-left,1/align-right" {
		t.Errorf("table cells: %q", got)
	}
	// The thread is named after the user's question, not after the tool
	// line of the message it hangs off, and that message is marked.
	if got := eval(`Array.from(document.querySelectorAll('#threads li')).map(li => li.textContent).join("|")`); got != "Main line|which one has rings?(1)" && got != "Main line|which one has rings?(2)" {
		t.Errorf("threads panel: %q", got)
	}
	mark := eval(`(document.querySelector('.msg[data-id="b0-1"] .threadmark') || {}).textContent || ""`)
	if !strings.Contains(mark, "which one has rings?") {
		t.Errorf("no thread marker on the message the thread hangs off: %q", mark)
	}
	if n := eval(`String(document.querySelectorAll('.msg .threadmark').length)`); n != "1" {
		t.Errorf("%s thread markers, want 1", n)
	}
	do(chromedp.Click(chromedp.CSS(`.msg[data-id="b0-1"] .threadmark`)))
	wait("the thread", visible, has("Saturn"))
	if v := eval(visible); strings.Contains(v, "a star") {
		t.Errorf("thread view shows the main line: %q", v)
	}
	shoot("desktop-thread.png")
	do(chromedp.Click(chromedp.CSS("#back")))

	// 2. While the agent works the status line says what it does, counts
	// the seconds and offers Stop, which sends /stop.
	do(chromedp.SendKeys(chromedp.CSS("#input"), "go"+kb.Enter))
	wait("the status line", `document.querySelector('#status').hidden ? "" : document.querySelector('#statustext').textContent`, has(" s"))
	if got := eval(`document.querySelector('#statustext code').textContent`); got != "bash" {
		t.Errorf("status names the tool as %q", got)
	}
	if st := eval(`document.querySelector('#statustext').textContent`); !strings.HasPrefix(st, "running bash · ") {
		t.Errorf("status line: %q", st)
	}
	shoot("desktop-status.png")
	do(chromedp.SendKeys(chromedp.CSS("#input"), "one more"+kb.Enter))
	wait("the queued count", `document.querySelector('#statustext').textContent`, has("1 queued message"))
	if st := eval(`document.querySelector('#statustext').textContent`); strings.Contains(st, "(s)") || strings.Contains(st, "messages") {
		t.Errorf("queued count reads %q", st)
	}
	do(chromedp.Click(chromedp.CSS("#stop")))
	wait("Stopped.", visible, has("Stopped."))
	if in := g.last(); in.Command == nil || in.Command.Name != "stop" || in.Conv != c1 {
		t.Errorf("Stop sent %+v", in)
	}
	if h := eval(`String(document.querySelector('#status').hidden)`); h != "true" {
		t.Error("the status line stays after the run ended")
	}

	// 3. A tree jump onto the thread's branch: the main line then shows
	// what the model will see, in the session's order (before the
	// command answers), and the thread still shows its own messages.
	do(chromedp.Click(chromedp.CSS("#tree")))
	wait("the tree", `String(document.querySelectorAll('.msg .buttons button').length)`, has("1"))
	const commandsPosted = `Array.from(document.querySelectorAll('.msg.user .body')).map(b => b.textContent.trim()).filter(s => s.startsWith("/")).join(",")`
	if got := eval(commandsPosted); got != "" {
		t.Errorf("the Stop and Tree buttons posted %q as messages", got)
	}
	if in := g.last(); in.Command == nil || in.Command.Name != "tree" {
		t.Errorf("Tree sent %+v", in)
	}
	do(chromedp.Click(chromedp.Search(`//button[text()="which one has rings?"]`)))
	wait("the main line on the thread's branch", visible, has("Saturn"))
	checkMain := func(when string) {
		t.Helper()
		v := eval(visible)
		for _, sub := range []string{"a star", "and the sun?"} {
			if strings.Contains(v, sub) {
				t.Errorf("%s: the main line still shows the other branch (%q): %q", when, sub, v)
			}
		}
		last := -1
		for _, want := range []string{"compare the planets", "Mars", "which one has rings?", "Saturn", "Session tree"} {
			i := strings.Index(v, want)
			if i < last {
				t.Errorf("%s: the main line lacks %q or shows it out of order: %q", when, want, v)
			}
			last = i
		}
		do(chromedp.Click(chromedp.CSS(`#threads li[data-thread="t1"]`)))
		if v := wait(when+": the thread", visible, has("Saturn")); !strings.Contains(v, "which one has rings?") || strings.Contains(v, "Mars") {
			t.Errorf("%s: the thread shows %q", when, v)
		}
		do(chromedp.Click(chromedp.CSS("#back")))
	}
	checkMain("after the jump")
	if v := eval(visible); !strings.Contains(v, "Now on the branch") {
		t.Errorf("no jump notice: %q", v)
	}
	// A reply in a thread to a message the jump brought onto the main
	// line names the thread it was posted in.
	do(chromedp.Click(chromedp.CSS(`.msg[data-id="u-t1"][data-thread=""] .threadbtn`)))
	do(chromedp.SendKeys(chromedp.CSS("#input"), "ask again"+kb.Enter))
	for deadline := time.Now().Add(10 * time.Second); g.last().Text != "ask again"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the reply did not reach the gateway: %+v", g.last())
		}
	}
	if in := g.last(); in.ReplyTo == nil || in.ReplyTo.ID != "u-t1" || in.ReplyTo.Conv.Thread != "t1" {
		t.Errorf("the reply to a moved message names %+v", in.ReplyTo)
	}
	do(chromedp.Click(chromedp.CSS("#back")))

	// 4. A reload keeps the conversation as the model sees it.
	do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#conn.ok")))
	wait("the conversation after a reload", visible, has("Saturn"))
	checkMain("after a reload")

	// 5. At 390 px the header fits, the panel is a drawer.
	do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#conn.ok")))
	wait("the phone layout", visible, has("Mars"))
	if w := eval(`String(document.documentElement.scrollWidth)`); w != "390" {
		t.Errorf("the page is %s px wide at 390 px", w)
	}
	if h := num(eval(`String(Math.round(document.querySelector('header').getBoundingClientRect().height))`)); h > 60 {
		t.Errorf("header is %d px high at 390 px (wrapped?)", h)
	}
	// The header's controls all fit on the screen.
	if r := num(eval(`String(Math.round(Math.max(...Array.from(document.querySelectorAll('header > *')).filter(e => e.offsetParent).map(e => e.getBoundingClientRect().right))))`)); r > 390 {
		t.Errorf("header controls reach x=%d at 390 px", r)
	}
	panelLeft := `String(Math.round(document.querySelector('aside').getBoundingClientRect().left))`
	if l := num(eval(panelLeft)); l < 390 {
		t.Errorf("the threads panel shows at x=%d before it is opened", l)
	}
	shoot("phone-main.png")
	do(chromedp.Click(chromedp.CSS("#menu")))
	wait("the open drawer", panelLeft, func(s string) bool { return num(s) <= 390-300 })
	shoot("phone-drawer.png")
	do(chromedp.Click(chromedp.CSS(`#threads li[data-thread="t1"]`)))
	wait("the thread on the phone", visible, has("Saturn"))
	wait("the closed drawer", panelLeft, func(s string) bool { return num(s) >= 390 })
	shoot("phone-thread.png")
}
