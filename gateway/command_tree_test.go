package gateway_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// treeCalls returns the /tree messages sent to conv, oldest first.
func treeCalls(h *harness, conv chat.ConvRef) []chattest.Call {
	var out []chattest.Call
	for _, c := range chattest.Filter(h.ad.Calls(), chattest.MethodSend) {
		if c.Conv == conv && strings.HasPrefix(c.Text, "**Session tree**") {
			out = append(out, c)
		}
	}
	return out
}

// treeLines returns the lines of a /tree message's drawing, and which of
// them is marked as where you are ("" if none), without indentation,
// branch lines and marks: the text /tree shows for each turn.
func treeLines(t *testing.T, md string) (lines []string, here string) {
	t.Helper()
	_, body, ok := strings.Cut(md, "```\n")
	body, _, ok2 := strings.Cut(body, "```")
	if !ok || !ok2 {
		t.Fatalf("no drawing in %q", md)
	}
	for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		l = strings.TrimLeft(l, " │├└")
		l = strings.TrimPrefix(strings.TrimPrefix(l, "● "), "○ ")
		if text, ok := strings.CutSuffix(l, "  ◀ you are here"); ok {
			if here != "" {
				t.Errorf("two lines marked as where you are: %q", md)
			}
			l, here = text, text
		}
		lines = append(lines, l)
	}
	return lines, here
}

// treeButtons returns the jump buttons of a /tree message.
func treeButtons(c chattest.Call) []chat.Button {
	var out []chat.Button
	for _, row := range c.Buttons {
		for _, b := range row {
			if strings.HasPrefix(b.ID, "tj:") {
				out = append(out, b)
			}
		}
	}
	return out
}

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
				if strings.HasPrefix(row[0].ID, "fk:") && row[0].Label == "↩ q2" {
					forkQ2 = row[0].ID
				}
			}
		}
		return forkQ2 != ""
	})
	h.press(dmConv, "owner", forkQ2)
	h.waitText(dmConv, "Forked before “q2”")
	h.send("q2 reworded")
	h.waitText(dmConv, "B2")
	want := []string{"user:q1", "assistant:A1", "user:q2 reworded", "assistant:B2"}
	h.waitFor("new branch", func() bool { return slices.Equal(headBranch(h), want) && len(deliveries(h)) == 3 && h.inbox.Len() == 0 })
	// /tree shows both branches and offers to jump back.
	h.send("/tree")
	h.waitText(dmConv, "Session tree", "q2 reworded", "q2")
	jumps := treeButtons(treeCalls(h, dmConv)[0])
	if len(jumps) != 1 || jumps[0].Label != "q2" {
		t.Fatalf("/tree offers %+v, want one jump to q2", jumps)
	}
	h.press(dmConv, "owner", jumps[0].ID)
	h.waitText(dmConv, "Now on the branch at “q2”")
	if got := headBranch(h); !slices.Equal(got, []string{"user:q1", "assistant:A1", "user:q2", "assistant:A2"}) {
		t.Fatalf("after jump: %q", got)
	}
}

// TestTreeButtonsReadAsTheTree: /tree labels each jump with the line of
// the turn its branch ends in (the same plain text, the same length, no
// markdown, never the bot's answer), marks where you are and offers no
// jump there, and bookkeeping (a fork's head move) is no branch of its
// own. The jump's notice quotes the same text, without a doubled period.
func TestTreeButtonsReadAsTheTree(t *testing.T) {
	long := "Explain **why** the planets of the `solar system` orbit the sun in one plane."
	h := newHarness(t, []faux.Turn{
		faux.Text("**Mars** has `2` moons."), faux.Text("# See the planets.\n\n| a | b |\n|--|--|\n| 1 | 2 |"), faux.Text("B2"),
	})
	h.send("tell me about *planets*")
	h.waitText(dmConv, "Mars")
	h.send(long)
	h.waitText(dmConv, "See the planets")
	h.waitFor("two runs", func() bool { return len(deliveries(h)) == 2 && h.inbox.Len() == 0 })
	h.send("/fork")
	var fork string
	h.waitFor("fork buttons", func() bool {
		for _, c := range chattest.Filter(h.ad.Calls(), chattest.MethodSend) {
			for _, row := range c.Buttons {
				if strings.HasPrefix(row[0].ID, "fk:") && strings.Contains(row[0].Label, "Explain why") {
					fork = row[0].ID
				}
			}
		}
		return fork != ""
	})
	h.press(dmConv, "owner", fork)
	h.waitText(dmConv, "Forked before")
	h.send("q2 reworded")
	h.waitText(dmConv, "B2")
	h.waitFor("third run", func() bool { return len(deliveries(h)) == 3 && h.inbox.Len() == 0 })

	check := func(c chattest.Call, wantHere string, wantJumps ...string) []chat.Button {
		t.Helper()
		lines, here := treeLines(t, c.Text)
		if here != wantHere {
			t.Errorf("marked as where you are: %q, want %q\n%s", here, wantHere, c.Text)
		}
		jumps := treeButtons(c)
		var labels []string
		for _, b := range jumps {
			labels = append(labels, b.Label)
			if !slices.Contains(lines, b.Label) {
				t.Errorf("button %q is no line of the tree %q", b.Label, lines)
			}
			if b.Label == here {
				t.Errorf("a button jumps to where you are: %q", b.Label)
			}
		}
		if !slices.Equal(labels, wantJumps) {
			t.Errorf("jump buttons %q, want %q\n%s", labels, wantJumps, c.Text)
		}
		for _, l := range lines {
			if strings.ContainsAny(l, "*`#|") || strings.Contains(l, "Mars") || strings.Contains(l, "See the planets") {
				t.Errorf("tree line %q shows markdown or a bot answer", l)
			}
		}
		return jumps
	}
	// The long question is cut where the tree cuts it, as plain text.
	explain := "Explain why the planets of the solar system orbit…"
	h.send("/tree")
	h.waitFor("the tree", func() bool { return len(treeCalls(h, dmConv)) == 1 })
	jumps := check(treeCalls(h, dmConv)[0], "q2 reworded", explain)
	if lines, _ := treeLines(t, treeCalls(h, dmConv)[0].Text); !slices.Equal(lines, []string{"tell me about planets", explain, "q2 reworded"}) {
		t.Errorf("tree lines %q", lines)
	}

	h.press(dmConv, "owner", jumps[0].ID)
	h.waitText(dmConv, "Now on the branch at")
	var notice string
	for _, m := range h.ad.Messages(dmConv) {
		if strings.Contains(m, "Now on the branch at") {
			notice = chat.Render(m, chat.DialectPlain)
		}
	}
	if !strings.Contains(notice, "“"+explain+"”") || strings.Contains(notice, "..") || strings.Contains(notice, "See the planets") {
		t.Errorf("jump notice reads %q", notice)
	}
	if got := headBranch(h); len(got) != 4 || got[2] != "user:"+long {
		t.Fatalf("after jump: %q", got)
	}
	// The jump lands after the answer's delivery: the answer stays
	// delivered (no redelivery of A2 after a restart).
	if got := headEntryTypes(h); !slices.Contains(got, "pibot.delivery") || got[len(got)-1] != "pibot.head" {
		t.Errorf("entries of the branch after the jump: %q", got)
	}

	// From there, the tree marks the long question and offers only the
	// other branch; the head entry the fork left under the first answer is
	// not a branch.
	h.send("/tree")
	h.waitFor("the second tree", func() bool { return len(treeCalls(h, dmConv)) == 2 })
	check(treeCalls(h, dmConv)[1], explain, "q2 reworded")
}

// headEntryTypes lists the types (custom types for custom entries) of the
// entries after the last user message on the DM's head branch.
func headEntryTypes(h *harness) []string {
	h.t.Helper()
	path := h.sessions()[0]
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		h.t.Fatal(err)
	}
	defer s.Close()
	head, _ := s.Tree().Head(dmConv.Key())
	b, err := s.Tree().Branch(head)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range b {
		switch {
		case e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == "user":
			out = nil
		case e.Type == session.TypeCustom:
			out = append(out, e.CustomType)
		default:
			out = append(out, e.Type)
		}
	}
	return out
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
