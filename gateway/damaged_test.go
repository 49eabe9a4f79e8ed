package gateway_test

import (
	"os"
	"strings"
	"testing"

	"github.com/pibot/pibot/providers/faux"
)

// TestDamagedEntryDoesNotStopTheConversation: an entry of the
// conversation's session whose message is not an object (here a string)
// made every later message answer "I cannot read this conversation's
// session", and `pibot session repair` found nothing to repair. The
// gateway's load now repairs it like pibot session repair does (the entry
// is left out, a copy of the file kept) and the conversation goes on
// with the rest of its history.
func TestDamagedEntryDoesNotStopTheConversation(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("first answer"), faux.Text("second answer")})
	h.send("first question")
	h.waitText(dmConv, "first answer")
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	h.stop()
	p := h.sessions()[0]
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	found := false
	for i, l := range lines {
		if strings.Contains(l, `"role":"assistant"`) && strings.Contains(l, "first answer") {
			at := strings.Index(l, `"message":`) + len(`"message":`)
			lines[i], found = l[:at]+`"first answer"}`, true
		}
	}
	if !found {
		t.Fatal("no answer in the session")
	}
	damaged := strings.Join(lines, "\n")
	if err := os.WriteFile(p, []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.send("second question")
	h.waitText(dmConv, "second answer")
	for _, m := range h.ad.Messages(dmConv) {
		if strings.Contains(m, "cannot read") || strings.Contains(m, "could not open") {
			t.Fatalf("the chat was told %q", m)
		}
	}
	reqs := h.model.Requests()
	last := reqs[len(reqs)-1]
	var texts []string
	for _, m := range last.Messages {
		texts = append(texts, string(m.Role)+":"+m.Text())
	}
	if got := strings.Join(texts, " | "); got != "user:first question | user:second question" {
		t.Fatalf("the model was sent %q", got)
	}
	if c, err := os.ReadFile(p + ".broken"); err != nil || string(c) != damaged {
		t.Fatalf("no copy of the damaged file kept: %v", err)
	}
}
