package gateway

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
)

// specsOnly offers commands and nothing else.
type specsOnly []chat.CommandSpec

func (s specsOnly) Commands() []chat.CommandSpec { return s }
func (specsOnly) Input(_ context.Context, in chat.Inbound) (string, string, bool, error) {
	return in.Text, "", false, nil
}
func (specsOnly) BeforeStart(context.Context, string) (string, error) { return "", nil }
func (specsOnly) Hooks(h agent.Hooks) agent.Hooks                     { return h }
func (specsOnly) End(context.Context, []llm.Message)                  {}
func (specsOnly) Review() (string, string)                            { return "", "" }
func (specsOnly) Approve(string, string) (string, error)              { return "", nil }

func TestTemplateCommands(t *testing.T) {
	long := strings.Repeat("é", 150)
	specs := specsOnly{
		{Name: "review", Description: "Review a file"},
		{Name: "help", Description: "shadowing a built-in"},
		{Name: "code-review", Description: "a dash Telegram refuses"},
		{Name: "Upper", Description: "upper case"},
		{Name: "empty"},
		{Name: "long", Description: long},
		{Name: "skill:deploy", Description: "How\nwe deploy."},
	}
	for i := 0; len(specs) < 120; i++ {
		specs = append(specs, chat.CommandSpec{Name: fmt.Sprintf("t%d", i), Description: "x"})
	}
	var logs bytes.Buffer
	builtin := commandTable()
	got := templateCommands(specs, builtin, slog.New(slog.NewTextHandler(&logs, nil)))
	byName := map[string]command{}
	skill := 0
	for _, c := range got {
		if c.noMenu {
			skill++
			if c.name != "skill:deploy" || c.help != "How we deploy." {
				t.Errorf("skill command %+v", c)
			}
		}
		if !c.message || !c.intake || c.dm != rightAnyone || c.group != rightAnyone {
			t.Errorf("/%s: %+v, want a message command for anyone", c.name, c)
		}
		byName[c.name] = c
	}
	if byName["review"].help != "Review a file" || byName["empty"].help != "prompt template" {
		t.Errorf("help texts %q, %q", byName["review"].help, byName["empty"].help)
	}
	if n := len([]rune(byName["long"].help)); n != 100 {
		t.Errorf("long description cut to %d characters, want 100", n)
	}
	for _, name := range []string{"help", "code-review", "Upper"} {
		if _, ok := byName[name]; ok {
			t.Errorf("/%s offered", name)
		}
		if !strings.Contains(logs.String(), "name="+name) {
			t.Errorf("/%s skipped without a log line", name)
		}
	}
	if skill != 1 {
		t.Errorf("%d skill commands, want 1", skill)
	}
	if n := len(builtin) + len(got) - skill; n != maxCommands {
		t.Errorf("%d commands in all, want the cap %d", n, maxCommands)
	}
	if templateCommands(nil, builtin, slog.Default()) != nil {
		t.Error("commands without extensions")
	}
}
