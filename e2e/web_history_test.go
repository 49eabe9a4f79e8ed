package e2e_test

import (
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
	"github.com/pibot/pibot/providers/faux"
)

// TestWebChatHistoryAcrossRestart drives the real gateway and web chat in
// headless Chromium: a live status while the model works, a conversation
// with a thread and a /fork back to its first answer (a branch move, like
// a /tree jump, which takes the other branch off the page), then a
// restart of pibot with the page open, which goes on from there. Reopened
// from the conversation list, the conversation is rebuilt by the new
// pibot as the model sees it: the main line without the branch the jump
// left, the thread named after the user's message and marked on the
// answer it hangs off.
// jsBodies lists the text of the visible messages, one per line.
const jsBodies = `Array.from(document.querySelectorAll('.msg')).filter(m => !m.hidden).map(m => m.querySelector('.body').textContent.trim()).join("\n")`

func TestWebChatHistoryAcrossRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	execPath := webChromium(t)
	dir := t.TempDir()
	p := startWebPibotIn(t, dir, "", []faux.Turn{faux.Text("First answer").WithDelay(700 * time.Millisecond), faux.Text("Second answer"), faux.Text("Thread answer")})

	b := newWebBrowser(t, execPath, 60*time.Second)

	b.do(
		chromedp.Navigate(p.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#conn.ok")),
		chromedp.SendKeys(chromedp.CSS("#input"), "hello"+kb.Enter),
	)
	// While the model works the status line says so, with a Stop button;
	// it goes once the answer is delivered.
	const jsStatus = `document.querySelector('#status').hidden ? "" : document.querySelector('#statustext').textContent + "|" + document.querySelector('#stop').textContent`
	st := b.waitFound("the status line", jsStatus)
	if !strings.Contains(st, "…") || !strings.HasSuffix(st, "|Stop") {
		t.Errorf("status line while the model works: %q", st)
	}
	firstID := b.waitFound("the first answer", jsBotWith("First answer"))
	b.waitJS("the status line to go", jsStatus, func(s string) bool { return s == "" })
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
	b.do(chromedp.Click(chromedp.CSS("#back")))

	// /fork from the second question moves the main line back to the
	// first answer: the view drops the second exchange, as the model will.
	b.do(chromedp.SendKeys(chromedp.CSS("#input"), "/fork"+kb.Enter))
	b.waitFound("the fork buttons", jsBotWith("Fork from which message"))
	b.do(chromedp.Click(chromedp.Search(`//div[@class="buttons"]/button[contains(text(),"second question")]`)))
	b.waitContains(jsVisible, "Forked before")
	b.waitJS("the jump to show", jsVisible, func(s string) bool { return !strings.Contains(s, "Second answer") })
	if v := strings.Split(b.eval(jsBodies), "\n"); slices.Contains(v, "second question") || !slices.Contains(v, "First answer") {
		t.Errorf("after the jump the main line shows %q", v)
	}
	p.waitBranch(t, mainLoc, "assistant:First answer")
	if got := p.branchTexts(t, mainLoc); slices.Contains(got, "assistant:Second answer") {
		t.Fatalf("the jump left the head on the second answer: %q", got)
	}
	threadID := b.eval(`(Array.from(document.querySelectorAll('#threads li')).find(li => li.dataset.thread) || {dataset: {}}).dataset.thread || ""`)
	if threadID == "" {
		t.Fatal("no thread in the panel")
	}

	// Restart pibot on the same data directory and address, with the page
	// open: it reconnects, and the conversation goes on from the open tab
	// where the model is.
	addr := p.srv.Listener.Addr().String()
	p.stop()
	p2 := startWebPibotIn(t, dir, addr, []faux.Turn{faux.Text("Answer after the restart")})
	b.do(chromedp.SendKeys(chromedp.CSS("#input"), "and now?"+kb.Enter))
	b.waitContains(jsVisible, "Answer after the restart")
	got := p2.waitBranch(t, mainLoc, "assistant:Answer after the restart")
	if want := []string{"user:hello", "assistant:First answer", "user:and now?", "assistant:Answer after the restart"}; !slices.Equal(got, want) {
		t.Errorf("branch after the restart = %q, want %q", got, want)
	}

	// A new conversation, then the old one reopened from the list: rebuilt
	// from the session files by the new pibot.
	b.do(chromedp.Click(chromedp.CSS("#newconv")))
	b.waitJS("an empty new conversation", jsBodies, func(s string) bool { return s == "" })
	const convList = `Array.from(document.querySelectorAll('#convs li')).map(li => li.dataset.conv + ":" + li.textContent).join("|")`
	b.waitContains(convList, conv+":hello")
	b.do(chromedp.Click(chromedp.CSS(`#convs li[data-conv="` + conv + `"]`)))
	b.waitContains(jsVisible, "Answer after the restart")
	v := strings.Split(b.eval(jsBodies), "\n")
	if want := []string{"hello", "First answer", "and now?", "Answer after the restart"}; !slices.Equal(v, want) {
		t.Errorf("the reopened main line shows %q, want %q", v, want)
	}
	if got := b.eval(`Array.from(document.querySelectorAll('#threads li')).map(li => li.textContent).join("|")`); !strings.HasPrefix(got, "Main line|tell me more") {
		t.Errorf("threads after the restart: %q", got)
	}
	if mark := b.eval(`(document.querySelector('.msg[data-id="` + firstID + `"] .threadmark') || {}).textContent || ""`); !strings.Contains(mark, "tell me more") {
		t.Errorf("the first answer has no thread marker after the restart: %q", mark)
	}
	b.do(chromedp.Click(chromedp.CSS(`#threads li[data-thread="` + threadID + `"]`)))
	b.waitContains(jsVisible, "Thread answer")
	if v := strings.Split(b.eval(jsBodies), "\n"); !slices.Equal(v, []string{"tell me more", "Thread answer"}) {
		t.Errorf("the reopened thread shows %q", v)
	}

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
	path := filepath.Join(out, "e2e-history-after-restart.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
