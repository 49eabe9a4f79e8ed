package extensions

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/agent/hooks"
	"github.com/pibot/pibot/chat"
)

func TestInputRunsHooksThenExpands(t *testing.T) {
	ws := t.TempDir()
	write := func(name, content string, mode os.FileMode) {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(".pi/prompts/greet.md", "Hello $1!", 0o644)
	write(".pi/skills/broken/SKILL.md", "---\nname: [x\n---\n", 0o644)
	// The hook turns "hi X" into the template command "/greet X" and
	// records where the message came from.
	write("hook.sh", `#!/bin/sh
read -r req
printf '%s\n' "$req" > "$(dirname "$0")/req.json"
echo '{"action":"transform","text":"/greet Ann"}'`, 0o755)
	var logs bytes.Buffer
	s := New(Options{Skills: []string{filepath.Join(ws, ".pi/skills")}, Prompts: []string{filepath.Join(ws, ".pi/prompts")},
		Hooks: []hooks.Hook{{Name: "h", Command: filepath.Join(ws, "hook.sh"), Events: []string{hooks.EventInput}, Timeout: 5 * time.Second}},
		Log:   slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(logs.String(), filepath.Join(ws, ".pi/skills/broken/SKILL.md")) {
		t.Errorf("the malformed skill is not named in the log:\n%s", logs.String())
	}
	if got := s.Commands(); len(got) != 1 || got[0].Name != "greet" || got[0].Description != "Hello $1!" {
		t.Errorf("commands %+v", got)
	}
	in := chat.Inbound{Text: "hi Ann", Conv: chat.ConvRef{Platform: "telegram", Channel: "42", DM: true}, User: chat.User{ID: "7", Name: "ann"}}
	text, reply, handled, err := s.Input(t.Context(), in)
	if err != nil || handled || reply != "" || text != "Hello Ann!" {
		t.Fatalf("Input = %q, %q, %v, %v", text, reply, handled, err)
	}
	req, err := os.ReadFile(filepath.Join(ws, "req.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"text":"hi Ann"`, `"platform":"telegram"`, `"user_id":"7"`, `"dm":"true"`} {
		if !strings.Contains(string(req), want) {
			t.Errorf("hook request %s lacks %s", req, want)
		}
	}
}
