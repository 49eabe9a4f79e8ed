package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestWebChatShowsTheAgent runs the real binary with the web chat, two
// agents (the default and ops) and a binding of one web conversation to
// ops, and drives the page in headless Chromium: the bound conversation
// is answered by ops's model and its /status names ops, a new
// conversation gets the default agent, and the conversation list labels
// each conversation with its own agent.
func TestWebChatShowsTheAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary in a browser")
	}
	execPath := webChromium(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "pibot")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/pibot/pibot/cmd/pibot").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, d := range []string{"ws", "ops"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	model := newAgentsModel(t)
	const opsConv = "opsconv"
	cfg := fmt.Sprintf(`data_dir: ./data
providers:
  fake: {api: openai-completions, base_url: %q, api_key: k, models: [{id: default-model}, {id: ops-model}]}
agent:
  workspace: ./ws
  model: fake/default-model
  sandbox: "off"
agents:
  ops:
    workspace: ./ops
    model: fake/ops-model
    system_prompt: "You are the OPS agent."
bindings:
  - {agent: ops, platform: web, channel: %s}
adapters:
  web: {enabled: true}
`, model.URL+"/v1", opsConv)
	if err := os.WriteFile(filepath.Join(dir, "pibot.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serveReady(t, bin, dir).base

	b := newWebBrowser(t, execPath, 90*time.Second)
	// The page keeps its conversation in localStorage: open the bound one.
	b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#conn.ok")))
	b.eval(`localStorage.setItem("pibot.conv", "` + opsConv + `"), ""`)
	b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#conn.ok")))
	if got := b.eval(`localStorage.getItem("pibot.conv") || ""`); got != opsConv {
		t.Fatalf("the page opened conversation %q, want %q", got, opsConv)
	}
	b.do(chromedp.SendKeys(chromedp.CSS("#input"), "hello ops"+kb.Enter))
	b.waitFound("ops's answer", jsBotWith("hello from ops-model"))
	b.do(chromedp.SendKeys(chromedp.CSS("#input"), "/status"+kb.Enter))
	if st := b.waitContains(jsBotTexts, "agent: ops"); !strings.Contains(st, "bindings[0]") {
		t.Errorf("/status in the bound conversation: %q", st)
	}

	// A new conversation: no binding matches, the default agent.
	b.do(chromedp.Click(chromedp.CSS("#newconv")))
	b.waitJS("an empty new conversation", jsBodies, func(s string) bool { return s == "" })
	other := b.eval(`localStorage.getItem("pibot.conv") || ""`)
	if other == "" || other == opsConv {
		t.Fatalf("new conversation %q", other)
	}
	b.do(chromedp.SendKeys(chromedp.CSS("#input"), "hello default"+kb.Enter))
	b.waitFound("the default agent's answer", jsBotWith("hello from default-model"))

	// The list, read afresh, labels each conversation with its agent.
	const jsAgents = `Array.from(document.querySelectorAll('#convs li')).map(li => li.dataset.conv + "=" + ((li.querySelector('.agent') || {}).textContent || "").trim()).sort().join("|")`
	want := []string{opsConv + "=· ops", other + "=· default"}
	b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#conn.ok")))
	b.waitJS("both conversations labelled", jsAgents, func(s string) bool {
		return strings.Contains(s, want[0]) && strings.Contains(s, want[1])
	})
	if got := b.eval(`(document.querySelector('#convs li[data-conv="` + opsConv + `"]') || {}).title || ""`); !strings.Contains(got, "(agent ops)") {
		t.Errorf("the bound conversation's tooltip: %q", got)
	}

	var models []string
	for _, r := range model.requests() {
		models = append(models, r.Model+":"+r.Last)
	}
	if strings.Join(models, ",") != "ops-model:hello ops,default-model:hello default" {
		t.Errorf("model requests: %q", models)
	}
}
