package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
)

// guardHook rewrites a bash call that says DANGER and replaces every
// tool result, as a real hook program over JSON lines.
const guardHook = `#!/bin/sh
read -r req
case "$req" in
*'"event":"tool_call"'*DANGER*) echo '{"action":"modify","input":{"command":"echo SANITIZED > out.txt"}}' ;;
*'"event":"tool_result"'*) echo '{"action":"modify","content":[{"type":"text","text":"HOOKED-RESULT"}]}' ;;
*) echo '{}' ;;
esac
`

// allowOnce returns the callback data of an approval message's "Allow
// once" button.
func allowOnce(t *testing.T, m telegramtest.Message) string {
	t.Helper()
	for _, row := range m.Buttons {
		for _, b := range row {
			if b.Text == "Allow once" {
				return b.CallbackData
			}
		}
	}
	t.Fatalf("no \"Allow once\" button on %q", m.Text)
	return ""
}

// TestApprovalAfterRestartRunsWhatWasShown replays issue 30's second
// attack through the real binary with a real hook program: a tool_call
// hook rewrote `echo DANGER` to `echo SANITIZED` and the approval showed
// the rewritten call. After a restart, "Allow once" runs exactly that
// call (SANITIZED is written, never DANGER), its result goes through the
// tool_result hook as without a restart, and a call approved after a
// restart with bash now denied does not run.
func TestApprovalAfterRestartRunsWhatWasShown(t *testing.T) {
	t.Parallel()
	b := newTgBot(t, func(r modelRequest) string {
		switch {
		case r.LastRole == "tool":
			return ccText("result: " + r.Last)
		case strings.Contains(r.Last, "run it"):
			return ccCalls(ccCall{"c1", "bash", `{"command":"echo DANGER > out.txt"}`})
		case strings.Contains(r.Last, "second"):
			return ccCalls(ccCall{"c2", "bash", `{"command":"echo SECOND > second.txt"}`})
		}
		return ccText("ok")
	})
	mkdirs(t, filepath.Join(b.dir, "ws"), filepath.Join(b.dir, "hooks"))
	hook := filepath.Join(b.dir, "hooks", "guard.sh")
	if err := os.WriteFile(hook, []byte(guardHook), 0o755); err != nil {
		t.Fatal(err)
	}
	hooks := "hooks:\n  guard:\n    command: " + hook + "\n    events: [tool_call, tool_result]\n"
	ask := b.config("  approvals: {dm: {bash: ask}}\n", tgAccess+hooks)
	deny := b.config("  approvals: {dm: {bash: deny}}\n", tgAccess+hooks)

	b.start(ask)
	approval := b.ask(tgOwner, "run it", "Approve")
	if !strings.Contains(approval.Text, "echo SANITIZED > out.txt") || strings.Contains(approval.Text, "DANGER") {
		t.Fatalf("the approval does not show the call the hook made: %q", approval.Text)
	}
	b.restart(ask)
	b.tg.AddCallback(tgOwner, tgOwner.ID, approval.ID, allowOnce(t, approval))
	b.waitMessage(tgOwner, 0, "result: HOOKED-RESULT")
	if got := b.file("ws/out.txt"); got != "SANITIZED\n" {
		t.Errorf("out.txt = %q, want the call that was shown (SANITIZED)", got)
	}

	approval = b.ask(tgOwner, "second", "Approve")
	b.restart(deny)
	b.tg.AddCallback(tgOwner, tgOwner.ID, approval.ID, allowOnce(t, approval))
	b.waitMessage(tgOwner, 0, "result: The bash tool is disabled in this chat.")
	if _, err := os.Stat(filepath.Join(b.dir, "ws", "second.txt")); err == nil {
		t.Error("a call of a tool denied since it was approved ran")
	}
}
