package gateway_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/providers/faux"
)

func TestTreeAndForkButtons(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("A1"), faux.Text("A2"), faux.Text("B2")})
	h.send("q1")
	h.waitText(dmConv, "A1")
	h.send("q2")
	h.waitText(dmConv, "A2")
	h.waitFor("two runs", func() bool { return len(deliveries(h)) == 2 && h.inbox.Len() == 0 })
	// /fork lists the user messages as buttons; pick q2: ask it again.
	h.send("/fork")
	var forkQ2 string
	h.waitFor("fork buttons", func() bool {
		for _, c := range chattest.Filter(h.ad.Calls(), chattest.MethodSend) {
			for _, row := range c.Buttons {
				if strings.HasPrefix(row[0].ID, "fk:") && strings.Contains(row[0].Label, "q2") {
					forkQ2 = row[0].ID
				}
			}
		}
		return forkQ2 != ""
	})
	h.press(dmConv, "owner", forkQ2)
	h.waitText(dmConv, "Now on the branch")
	h.send("q2 reworded")
	h.waitText(dmConv, "B2")
	want := []string{"user:q1", "assistant:A1", "user:q2 reworded", "assistant:B2"}
	h.waitFor("new branch", func() bool { return slices.Equal(headBranch(h), want) && len(deliveries(h)) == 3 && h.inbox.Len() == 0 })
	// /tree shows both branches and offers to jump back.
	h.send("/tree")
	h.waitText(dmConv, "Session tree", "q2 reworded", "q2")
	var jump string
	for _, c := range chattest.Filter(h.ad.Calls(), chattest.MethodSend) {
		for _, row := range c.Buttons {
			if strings.HasPrefix(row[0].ID, "tj:") && strings.Contains(row[0].Label, "A2") {
				jump = row[0].ID
			}
		}
	}
	if jump == "" {
		t.Fatal("/tree offers no jump to the first branch")
	}
	h.press(dmConv, "owner", jump)
	h.waitText(dmConv, "Now on the branch at: _A2_")
	if got := headBranch(h); !slices.Equal(got, []string{"user:q1", "assistant:A1", "user:q2", "assistant:A2"}) {
		t.Fatalf("after jump: %q", got)
	}
}

func TestNewStartsAFreshSession(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("one"), faux.Text("two")})
	h.send("first")
	h.waitText(dmConv, "one")
	h.waitFor("first run", func() bool { return len(h.sessions()) == 1 && slices.Contains(headBranch(h), "assistant:one") })
	h.send("/new")
	h.waitText(dmConv, "New session")
	h.send("second")
	h.waitText(dmConv, "two")
	h.waitFor("second session", func() bool { return len(h.sessions()) == 2 })
	reqs := h.model.Requests()
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Text() == "first" {
			t.Fatal("the new session saw the old one")
		}
	}
}

func TestMigrationKeepsTheConversation(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("before move"), faux.Text("after move")})
	h.send("hello", inConv(groupConv), from("alice"), mentioned())
	h.waitText(groupConv, "before move")
	h.waitFor("delivered", func() bool { return len(deliveries(h)) == 1 && h.inbox.Len() == 0 })
	moved := groupConv
	moved.Channel = "super"
	h.move(groupConv, moved)
	h.send("still me", inConv(moved), from("alice"), mentioned())
	h.waitText(moved, "after move")
	if n := len(h.sessions()); n != 1 {
		t.Fatalf("%d sessions after migration, want 1", n)
	}
	if texts := h.lastRequestTexts(); !slices.Contains(texts, "hello") {
		t.Fatalf("the moved conversation lost its history: %q", texts)
	}
}
