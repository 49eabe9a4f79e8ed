package transcript

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// attack returns markup and markdown that try, each in its own way, to
// run script when the page is shown (each payload sets window.__pwned to
// its tag, changes the title or opens a dialog), to load something, or to
// leave a link that runs script when clicked.
func attack(tag string) string {
	set := `window.__pwned='` + tag + `';document.title='pwned';alert('` + tag + `')`
	return strings.Join([]string{
		`<script>` + set + `</script>`,
		`"><script>` + set + `</script>`,
		`<img src=x onerror="` + set + `">`,
		`<svg onload="` + set + `"><script>` + set + `</script></svg>`,
		`<a href="javascript:` + set + `">raw link ` + tag + `</a>`,
		`[md link](javascript:` + set + `) [case](JaVaScRiPt:alert(1)) [tab](java&#x09;script:alert(1)) [data](data:text/html,<script>alert(1)</script>)`,
		`<javascript:alert('` + tag + `')> ![img](javascript:alert(1)) ![remote ` + tag + `](https://example.com/pixel.png)`,
		`<iframe src="javascript:` + set + `"></iframe><details open ontoggle="` + set + `">x</details>`,
		`<math><mtext><table><mglyph><style><img src=x onerror="` + set + `">`,
		`<style>body{display:none}</style><base href="javascript:alert(1)//"><meta http-equiv="refresh" content="0;url=javascript:alert(1)">`,
		`<form action="javascript:alert(1)"><button>go</button></form>`,
	}, "\n\n")
}

// markdown is content that must render: a heading, a table, a code block,
// allowed links.
const markdown = "# Planets\n\n| planet | moons |\n|:--|--:|\n| Mars | 2 |\n\n```go\nfmt.Println(\"hi\")\n```\n\n[ok](https://example.com/ok) and <mailto:someone@example.com>"

// hostile writes a session whose every field a person sees holds an
// attack: the name, labels, user and assistant text, thinking, tool calls
// (name and arguments) and outputs, errors, shell commands, custom
// entries and messages, summaries, the chat locations.
func hostile(t *testing.T) *session.Session {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := session.CreateFile(t.TempDir(), session.Header{ID: session.NewSessionID(now), Timestamp: session.Timestamp(now)},
		session.Entry{Type: session.TypeModelChange, Provider: `f"><script>alert(1)</script>`, ModelID: "m"}, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	add := func(e session.Entry, parent string) string {
		t.Helper()
		e.ParentID = parent
		out, err := s.Append(e, session.SyncAlways)
		if err != nil {
			t.Fatalf("append %s: %v", e.Type, err)
		}
		return out.ID
	}
	msg := func(m llm.Message, loc string) session.Entry {
		e := session.Entry{Type: session.TypeMessage, Message: &m}
		if loc != "" {
			e.Pibot = &session.Meta{Loc: loc}
		}
		return e
	}
	const main, thread = "web::c1", "web::c1:t1"
	name := `name ` + attack("name")
	add(session.Entry{Type: session.TypeSessionInfo, Name: &name}, s.Tree().Leaf())
	u1 := add(msg(llm.UserText(markdown+"\n\n"+attack("user"), 1), main), s.Tree().Leaf())
	label := `label ` + attack("label")
	lab := add(session.Entry{Type: session.TypeLabel, TargetID: u1, Label: &label}, u1)
	call := add(msg(llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{
		{Type: llm.ContentThinking, Thinking: "thinking\n\n" + markdown + "\n\n" + attack("thinking")},
		{Type: llm.ContentText, Text: markdown + "\n\n" + attack("assistant")},
		{Type: llm.ContentToolCall, ID: "c1", Name: `bash"><script>alert(1)</script>`, Arguments: json.RawMessage(`{"command":"\"><script>window.__pwned='args'</script><img src=x onerror=alert(1)>"}`)},
	}}, main), lab)
	out := add(msg(llm.Message{Role: llm.RoleToolResult, ToolCallID: "c1", ToolName: `bash"><img src=x onerror=alert(1)>`, IsError: true,
		Content: []llm.Content{llm.TextBlock(attack("output"))}}, main), call)
	a1 := add(msg(llm.Message{Role: llm.RoleAssistant, StopReason: llm.StopError, ErrorMessage: attack("error"),
		Content: []llm.Content{llm.TextBlock("answer " + attack("answer"))}}, main), out)
	bash := add(msg(llm.Message{Role: llm.RoleBashExecution, Command: attack("command"), Output: attack("shell")}, ""), a1)
	content, _ := json.Marshal(markdown + "\n\n" + attack("custom message"))
	cm := add(session.Entry{Type: session.TypeCustomMessage, CustomType: `x"><script>alert(1)</script>`, Content: content, Display: true}, bash)
	comp := add(session.Entry{Type: session.TypeCompaction, Summary: markdown + "\n\n" + attack("compaction"), FirstKeptEntryID: a1}, cm)
	// A fork: two branches named after hostile first messages; a thread
	// head on one, a head of a hostile location on a custom entry.
	b1 := add(msg(llm.UserText("tell me more "+attack("branch one"), 2), thread), comp)
	add(session.Entry{Type: session.TypeBranchSummary, FromID: b1, Summary: attack("branch summary")}, b1)
	b2 := add(msg(llm.UserText(attack("branch two"), 3), main), comp)
	add(session.Entry{Type: session.TypeCustom, CustomType: `custom"><script>alert(1)</script>`, Data: json.RawMessage(`{}`),
		Pibot: &session.Meta{Loc: `"><script>alert(1)</script>::c`}}, b2)
	return s
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

// TestHTMLHostileInBrowser exports a session full of attacks as HTML and
// loads the file in headless Chromium: no script runs (no global set, no
// title changed, no dialog opened), nothing is loaded, no element carries
// an event attribute or a link other than http, https or mailto, and the
// markdown is rendered (headings, tables, code blocks). It does so twice:
// as exported, and without the page's content security policy, so the
// escaping holds on its own.
func TestHTMLHostileInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	execPath := chromium(t)
	s := hostile(t)
	var b bytes.Buffer
	if err := HTML(&b, s.Tree()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	exported := filepath.Join(dir, "export.html")
	if err := os.WriteFile(exported, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	page1 := b.String()
	start := strings.Index(page1, `<meta http-equiv="Content-Security-Policy"`)
	if start < 0 {
		t.Fatal("the page has no content security policy")
	}
	end := start + strings.Index(page1[start:], ">") + 1
	bare := filepath.Join(dir, "without-csp.html")
	if err := os.WriteFile(bare, []byte(page1[:start]+page1[end:]), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(execPath), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.Flag("disable-background-networking", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()

	// Dialogs are recorded and closed (an open one would block the page).
	var mu sync.Mutex
	var dialogs []string
	if err := chromedp.Do(bctx); err != nil {
		t.Fatal(err)
	}
	events := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			mu.Lock()
			dialogs = append(dialogs, ev.Message)
			mu.Unlock()
			_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return v
	}

	for _, file := range []string{exported, bare} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			if err := chromedp.Do(bctx, chromedp.Navigate("file://"+file)); err != nil {
				t.Fatal(err)
			}
			// Give event handlers (an image's onerror, a details'
			// ontoggle) their chance to run.
			if _, err := chromedp.Run(bctx, chromedp.Evaluate[string](`new Promise(r => setTimeout(() => r("ok"), 500))`, chromedp.EvalAwaitPromise)); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			opened := slices.Clone(dialogs)
			mu.Unlock()
			if len(opened) > 0 {
				t.Errorf("script opened dialogs: %q", opened)
			}
			if got := eval(`String(window.__pwned)`); got != "undefined" {
				t.Errorf("script ran: window.__pwned = %q", got)
			}
			if got := eval(`document.title`); !strings.HasPrefix(got, "name <script>") {
				t.Errorf("title %q: changed by a script, or the session name is not shown as text", got)
			}
			if got := eval(`Array.from(document.querySelectorAll('script,iframe,object,embed,svg,math,img,form,button,base,link,body style,head meta[http-equiv="refresh"]')).map(e => e.tagName).join(",")`); got != "" {
				t.Errorf("elements from the session: %s", got)
			}
			if got := eval(`Array.from(document.querySelectorAll('*')).flatMap(e => Array.from(e.attributes).filter(a => a.name.startsWith('on')).map(a => e.tagName + " " + a.name)).join(",")`); got != "" {
				t.Errorf("event attributes: %s", got)
			}
			links := eval(`Array.from(document.querySelectorAll('[href],[src],[action]')).map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action')).join("\n")`)
			for _, l := range strings.Split(links, "\n") {
				if !strings.HasPrefix(l, "https://example.com/") && !strings.HasPrefix(l, "mailto:someone@example.com") {
					t.Errorf("a link to %q", l)
				}
			}
			if !strings.Contains(links, "https://example.com/ok") || !strings.Contains(links, "mailto:someone@example.com") {
				t.Errorf("the allowed links are not links: %q", links)
			}
			// The remote image is a link, not an image.
			if got := eval(`String(document.querySelectorAll('a.img[href="https://example.com/pixel.png"]').length)`); got == "0" {
				t.Error("the remote image is not shown as a link")
			}
			// Markdown rendered: in the user's, the assistant's, the
			// thinking's, the custom message's and the summary's text.
			if got := eval(`String(document.querySelectorAll('.md h1').length) + "," + document.querySelectorAll('.md table').length + "," + document.querySelectorAll('.md pre code').length`); got != "5,5,5" {
				t.Errorf("headings, tables, code blocks rendered: %s, want 5,5,5", got)
			}
			if got := eval(`Array.from(document.querySelector('.user .md table').querySelectorAll('th,td')).map(c => c.textContent + "/" + (c.getAttribute('align') || "")).join(",")`); got != "planet/left,moons/right,Mars/left,2/right" {
				t.Errorf("table cells %q", got)
			}
			// The attacks are shown as the text they are.
			text := eval(`document.body.innerText`)
			for _, want := range []string{`<script>window.__pwned='user'`, `<img src=x onerror="window.__pwned='assistant'`, `"><script>window.__pwned='args'</script>`, `<svg onload=`} {
				if !strings.Contains(text, want) {
					t.Errorf("the page does not show %q as text", want)
				}
			}
			// Heads are named as /tree names places, the hostile one as
			// text.
			marks := eval(`Array.from(document.querySelectorAll('.mark')).map(m => m.textContent).join("|")`)
			for _, want := range []string{"◀ web chat, thread “tell me more <script>window.__pwned='branch one'", "◀ web chat|", "◀ pi resumes here", `◀ "><script>alert(1)</script> conversation c`, "label <script>"} {
				if !strings.Contains(marks, want) {
					t.Errorf("marks %q lack %q", marks, want)
				}
			}
			if strings.Contains(marks, "web::") {
				t.Errorf("a head is named by its key: %q", marks)
			}
		})
	}
	// The style sheet is the one the policy allows.
	if err := chromedp.Do(bctx, chromedp.Navigate("file://"+exported)); err != nil {
		t.Fatal(err)
	}
	if got := eval(`getComputedStyle(document.body).maxWidth`); got != "960px" {
		t.Errorf("the page's own style is not applied (max-width %q): its hash does not match the policy", got)
	}
}
