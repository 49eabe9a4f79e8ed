package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/pibot/pibot/adapters/web"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// jsShown lists the visible messages of the current view as JSON:
// "user:text", "bot:text" or "note:text" each.
const jsShown = `JSON.stringify(Array.from(document.querySelectorAll('.msg')).filter(m => !m.hidden).map(m => (m.classList.contains('note') ? 'note' : m.classList.contains('user') ? 'user' : 'bot') + ':' + m.querySelector('.body').textContent.trim()))`

// contextTexts returns what the model sees at location loc, as the web
// chat shows it: "user:text" for each user message, "bot:text" for each
// run's answers (the texts of its assistant messages), "note:…" for a
// compaction's summary.
func (p *webPibot) contextTexts(t *testing.T, loc string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(p.dir, "sessions", "*", "*.jsonl"))
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
		c, err := s.Tree().Context(head)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := c.LLMMessages()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		bot := ""
		flush := func() {
			if bot != "" {
				out = append(out, "bot:"+bot)
			}
			bot = ""
		}
		for _, m := range msgs {
			switch m.Role {
			case llm.RoleUser:
				flush()
				out = append(out, "user:"+m.Text())
			case llm.RoleAssistant:
				if txt := strings.TrimSpace(m.Text()); txt != "" {
					if bot != "" {
						bot += "\n\n"
					}
					bot += txt
				}
			case llm.RoleCompactionSummary:
				flush()
				out = append(out, "note:"+m.Summary)
			}
		}
		flush()
		return out
	}
	t.Fatalf("no session file holds %s", loc)
	return nil
}

// sessionShown returns the visible messages of the page's current view
// without the bot's command answers (the tree, a jump's notice), which
// are not part of the session.
func (b *webBrowser) sessionShown() []string {
	b.t.Helper()
	var all, out []string
	if err := json.Unmarshal([]byte(b.eval(jsShown)), &all); err != nil {
		b.t.Fatal(err)
	}
	for _, s := range all {
		if !strings.HasPrefix(s, "bot:Session tree") && !strings.HasPrefix(s, "bot:🌿") {
			out = append(out, s)
		}
	}
	return out
}

// waitShown waits until the view shows exactly want (sessionShown).
func (b *webBrowser) waitShown(what string, want []string) {
	b.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := b.sessionShown()
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: the page shows %q, want %q (the session's context)", what, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// treeOnPage returns the lines of the last session tree on the page (the
// turns as the tree shows them, without marks), the line marked as where
// you are, and the labels of its jump buttons.
func (b *webBrowser) treeOnPage() (lines []string, here string, buttons []string) {
	b.t.Helper()
	const js = `(() => { const ms = Array.from(document.querySelectorAll('.msg.bot')).filter(m => m.querySelector('.body').textContent.startsWith('Session tree')); const m = ms[ms.length - 1]; return JSON.stringify({pre: m.querySelector('pre').textContent, buttons: Array.from(m.querySelectorAll('.buttons button')).map(x => x.textContent)}); })()`
	var tree struct {
		Pre     string
		Buttons []string
	}
	if err := json.Unmarshal([]byte(b.eval(js)), &tree); err != nil {
		b.t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(tree.Pre), "\n") {
		l = strings.TrimLeft(l, " │├└")
		l = strings.TrimPrefix(strings.TrimPrefix(l, "● "), "○ ")
		if text, ok := strings.CutSuffix(l, "  ◀ you are here"); ok {
			l, here = text, text
		}
		lines = append(lines, l)
	}
	return lines, here, tree.Buttons
}

// TestWebChatTreeJumpOntoAThread drives the real gateway and web chat in
// headless Chromium: the Tree button opens the session tree without
// posting "/tree", its jump buttons read as its lines and none jumps to
// where you are; a jump of the main line onto a thread's branch then
// shows exactly what the model sees there (the session's context for the
// main line), and so does the thread, live, after a reload, after a
// restart of pibot, and after a reload of the restarted pibot.
func TestWebChatTreeJumpOntoAThread(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	execPath := webChromium(t)
	dir := t.TempDir()
	p := startWebPibotIn(t, dir, "", []faux.Turn{faux.Text("First answer"), faux.Text("Second answer"), faux.Text("Thread answer")})
	b := newWebBrowser(t, execPath, 90*time.Second)

	b.do(
		chromedp.Navigate(p.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#conn.ok")),
		chromedp.SendKeys(chromedp.CSS("#input"), "hello"+kb.Enter),
	)
	firstID := b.waitFound("the first answer", jsBotWith("First answer"))
	b.do(chromedp.SendKeys(chromedp.CSS("#input"), "second question"+kb.Enter))
	b.waitFound("the second answer", jsBotWith("Second answer"))
	conv := b.eval(`localStorage.getItem("pibot.conv") || ""`)
	mainLoc := chat.ConvRef{Platform: web.Platform, Channel: conv, DM: true}.Key()
	p.waitBranch(t, mainLoc, "assistant:Second answer")

	// A thread on the first answer.
	b.do(
		chromedp.Click(chromedp.CSS(`.msg.bot[data-id="`+firstID+`"] .threadbtn`)),
		chromedp.WaitVisible(chromedp.CSS("#threadhead")),
		chromedp.SendKeys(chromedp.CSS("#input"), "tell me more"+kb.Enter),
	)
	b.waitContains(jsVisible, "Thread answer")
	thread := b.eval(`(document.querySelector('#threads li.active') || {dataset: {}}).dataset.thread || ""`)
	threadLoc := chat.ConvRef{Platform: web.Platform, Channel: conv, Thread: thread, DM: true}.Key()
	p.waitBranch(t, threadLoc, "assistant:Thread answer")
	b.do(chromedp.Click(chromedp.CSS("#back")))

	// The Tree button opens the tree; it posts no "/tree" of the user.
	b.do(chromedp.Click(chromedp.CSS("#tree")))
	b.waitFound("the session tree", jsBotWith("Session tree"))
	if n := b.eval(`String(Array.from(document.querySelectorAll('.msg.user .body')).filter(x => x.textContent.trim() === "/tree").length)`); n != "0" {
		t.Errorf("the Tree button posted /tree as a message of the user (%s times)", n)
	}
	lines, here, buttons := b.treeOnPage()
	if here != "second question" || !slices.Equal(buttons, []string{"tell me more"}) {
		t.Fatalf("tree %q (here: %q) offers %q; want the one jump to the thread's branch", lines, here, buttons)
	}
	for _, l := range buttons {
		if !slices.Contains(lines, l) {
			t.Errorf("button %q is no line of the tree %q", l, lines)
		}
	}

	// The jump: the main line shows the thread's branch, as the model
	// will see it, and the thread still shows its own.
	b.do(chromedp.Click(chromedp.Search(`//div[@class="buttons"]/button[text()="tell me more"]`)))
	b.waitContains(jsVisible, "Now on the branch at")
	want := p.contextTexts(t, mainLoc)
	if !slices.Equal(want, []string{"user:hello", "bot:First answer", "user:tell me more", "bot:Thread answer"}) {
		t.Fatalf("the main line's context after the jump is %q", want)
	}
	threadCtx := p.contextTexts(t, threadLoc)
	root := slices.Index(threadCtx, "bot:First answer")
	if root < 0 {
		t.Fatalf("the thread's context %q lacks the answer it hangs off", threadCtx)
	}
	threadWant := threadCtx[root+1:]
	openThread := func() {
		t.Helper()
		b.do(chromedp.Click(chromedp.CSS(`#threads li[data-thread="` + thread + `"]`)))
	}
	checkBoth := func(when string) {
		t.Helper()
		b.waitShown(when+": the main line", want)
		openThread()
		b.waitShown(when+": the thread", threadWant)
		b.do(chromedp.Click(chromedp.CSS("#back")))
	}
	checkBoth("after the jump")
	// The tree now marks the thread's turn and offers the way back.
	b.do(chromedp.Click(chromedp.CSS("#tree")))
	b.waitJS("the second tree", `String(Array.from(document.querySelectorAll('.msg.bot .body')).filter(x => x.textContent.startsWith('Session tree')).length)`, func(s string) bool { return s == "2" })
	if _, here, buttons := b.treeOnPage(); here != "tell me more" || !slices.Equal(buttons, []string{"second question"}) {
		t.Errorf("after the jump the tree marks %q and offers %q", here, buttons)
	}

	b.reload()
	checkBoth("after a reload")

	// Restart pibot with the page open: it reconnects and rebuilds.
	addr := p.srv.Listener.Addr().String()
	p.stop()
	p2 := startWebPibotIn(t, dir, addr, []faux.Turn{faux.Text("Answer after the restart")})
	b.waitJS("the reconnection", `document.querySelector('#conn').textContent`, func(s string) bool { return s == "reconnecting…" || s == "connected" })
	b.do(chromedp.WaitVisible(chromedp.CSS("#conn.ok")))
	if got := p2.contextTexts(t, mainLoc); !slices.Equal(got, want) {
		t.Fatalf("the restart changed the main line's context: %q", got)
	}
	checkBoth("after a restart")
	b.reload()
	checkBoth("after a reload of the restarted pibot")

	// The conversation goes on from the thread's branch.
	b.do(chromedp.SendKeys(chromedp.CSS("#input"), "and now?"+kb.Enter))
	b.waitContains(jsVisible, "Answer after the restart")
	p2.waitBranch(t, mainLoc, "assistant:Answer after the restart")
	b.waitShown("after the next answer", p2.contextTexts(t, mainLoc))

	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("PIBOT_SCREENSHOTS")
	if out == "" {
		out = t.ArtifactDir()
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, "e2e-tree-jump-onto-thread.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
