package e2e_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/internal/extensions"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// extensionsIn writes a prompt template and a skill into a workspace and
// loads them.
func extensionsIn(t *testing.T) *extensions.Set {
	t.Helper()
	ws := t.TempDir()
	for name, body := range map[string]string{
		".pi/prompts/review.md":      "---\ndescription: Review a file\n---\nReview $1, focus: ${@:2}.",
		".pi/skills/deploy/SKILL.md": "---\ndescription: How we deploy.\n---\nRun make deploy.\n",
	} {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return extensions.New(extensions.Options{Skills: []string{filepath.Join(ws, ".pi", "skills")}, Prompts: []string{filepath.Join(ws, ".pi", "prompts")}})
}

// lastPrompt is the last user message of the model's latest request.
func lastPrompt(t *testing.T, m *faux.Model) string {
	t.Helper()
	reqs := m.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	msgs := reqs[len(reqs)-1].Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return msgs[i].Text()
		}
	}
	return ""
}

// Telegram: a prompt template is in the bot's command menu
// (setMyCommands) and "/review@bot a.go errors" reaches the model
// expanded; /skill:NAME expands the skill.
func TestTelegramPromptTemplates(t *testing.T) {
	t.Parallel()
	set := extensionsIn(t)
	w := newWorld(t, []faux.Turn{faux.Text("reviewed"), faux.Text("skilled")},
		withConfig(func(c *gateway.Config) { c.Extensions = set }))
	w.waitFor("the command menu", func() bool {
		for _, c := range w.srv.Commands() {
			if c.Command == "review" && c.Description == "Review a file" {
				return true
			}
		}
		return false
	})
	w.say(ownerChat, owner, "/review a.go error handling")
	w.waitMessage(ownerChat, "reviewed")
	if got := lastPrompt(t, w.model); got != "Review a.go, focus: error handling." {
		t.Errorf("model got %q", got)
	}
	w.say(ownerChat, owner, "/skill:deploy today")
	w.waitMessage(ownerChat, "skilled")
	if got := lastPrompt(t, w.model); !strings.HasPrefix(got, `<skill name="deploy"`) || !strings.HasSuffix(got, "Run make deploy.\n</skill>\n\ntoday") {
		t.Errorf("model got %q", got)
	}
}

// Slack: "!review" in a message and "/pi review" (the slash command) are
// the template command, because the gateway registered its name with the
// adapter; "!skill:deploy" expands the skill.
func TestSlackPromptTemplates(t *testing.T) {
	t.Parallel()
	set := extensionsIn(t)
	w := newSlackWorld(t, []faux.Turn{faux.Text("bang"), faux.Text("slash"), faux.Text("skilled")},
		slackConfig(func(c *gateway.Config) { c.Extensions = set }))
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "!review a.go tests"})
	w.waitSlack(slackOwnerDM, "", "bang")
	if got := lastPrompt(t, w.model); got != "Review a.go, focus: tests." {
		t.Errorf("!review: model got %q", got)
	}
	w.command(slackOwnerDM, slackOwner, "review b.go docs")
	w.waitSlack(slackOwnerDM, "", "slash")
	if got := lastPrompt(t, w.model); got != "Review b.go, focus: docs." {
		t.Errorf("/pi review: model got %q", got)
	}
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "!skill:deploy now"})
	w.waitSlack(slackOwnerDM, "", "skilled")
	if got := lastPrompt(t, w.model); !strings.HasSuffix(got, "</skill>\n\nnow") {
		t.Errorf("!skill: model got %q", got)
	}
	if reqs := w.model.Requests(); slices.ContainsFunc(reqs, func(r llm.Request) bool {
		return strings.Contains(r.Messages[len(r.Messages)-1].Text(), "!review")
	}) {
		t.Error("a template command reached the model unexpanded")
	}
}
