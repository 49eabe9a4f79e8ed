package gateway_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway"
)

// changing holds, per command whose group right is "owners to change", an
// argument that changes something (the test fails for a command missing
// here, so a new one gets its rights tested).
var changing = map[string]string{"queue": "interrupt", "model": "faux/m", "thinking": "high", "schedule": "in 2h check", "limits": "lift global", "extensions": "approve 0123456789ab"}

// answer sends text as user in conv and returns what the bot answered.
func (h *harness) answer(conv chat.ConvRef, user, text string) string {
	h.t.Helper()
	before := len(h.ad.Messages(conv))
	h.send(text, inConv(conv), from(user))
	var got []string
	h.waitFor("an answer to "+text, func() bool {
		got = h.ad.Messages(conv)[before:]
		return len(got) > 0
	})
	return strings.Join(got, "\n")
}

// The command table is the one source of /help, of the platform's command
// list and of the rights: every command has help and rights, /help and the
// platform list every listed command, an unknown command is answered as
// such, and in a group the rights of the table are the ones enforced.
func TestCommandTable(t *testing.T) {
	table := gateway.CommandTable()
	seen := map[string]bool{}
	for _, c := range table {
		switch {
		case c.Name == "" || seen[c.Name]:
			t.Errorf("command %q: empty or listed twice", c.Name)
		case c.Help == "":
			t.Errorf("/%s has no help", c.Name)
		case c.DM == "" || c.Group == "" || c.Session == "":
			t.Errorf("/%s: rights %q/%q or session need %q unknown", c.Name, c.DM, c.Group, c.Session)
		case c.HasHandler == (c.Queue != ""):
			t.Errorf("/%s: needs exactly one of a handler and a queue mode", c.Name)
		case c.DM != "anyone":
			t.Errorf("/%s: a DM is the user's own conversation; its DM right is %q", c.Name, c.DM)
		case c.Group == "owners to change" && (!slices.Contains(c.Looks, "") || changing[c.Name] == ""):
			t.Errorf("/%s: looking must be for everyone, and the test needs an argument that changes", c.Name)
		}
		seen[c.Name] = true
	}

	h := newHarness(t, nil)
	<-h.g.Ready()
	// The platform's list is registered in the background.
	h.waitFor("the command list", func() bool { return len(h.ad.Commands()) > 0 })
	help := h.answer(dmConv, "owner", "/help")
	var listed []string
	for _, spec := range h.ad.Commands() {
		listed = append(listed, spec.Name)
	}
	for _, c := range table {
		line := "- `/" + strings.TrimSpace(c.Name+" "+c.Args) + "` — " + c.Help
		if c.Hidden == strings.Contains(help, line) || c.Hidden == slices.Contains(listed, c.Name) {
			t.Errorf("/%s (hidden %v): in /help %v, in the platform's list %v", c.Name, c.Hidden, strings.Contains(help, line), slices.Contains(listed, c.Name))
		}
	}
	if !strings.HasSuffix(help, gateway.GroupRightsNote) {
		t.Errorf("/help does not end with the group rights:\n%s", help)
	}
	if got := h.answer(dmConv, "owner", "/frobnicate"); got != "Unknown command `/frobnicate`. Send /help for the list." {
		t.Errorf("unknown command answered %q", got)
	}

	// A member of the group, each command in a location of its own.
	for _, c := range table {
		conv := chat.ConvRef{Platform: groupConv.Platform, Channel: groupConv.Channel, Thread: "member-" + c.Name}
		refusal := func(arg string) string {
			if first, _, _ := strings.Cut(arg, " "); c.EchoArg && first != "" {
				arg = " " + first
			} else {
				arg = ""
			}
			return fmt.Sprintf("Only an owner of this bot can use `/%s%s` in a group: it changes the conversation for everyone here.", c.Name, arg)
		}
		switch c.Group {
		case "owners":
			if got := h.answer(conv, "bob", "/"+c.Name); got != refusal("") {
				t.Errorf("member ran /%s: %q", c.Name, got)
			}
		case "owners to change":
			if got := h.answer(conv, "bob", "/"+c.Name+" "+changing[c.Name]); got != refusal(changing[c.Name]) {
				t.Errorf("member ran /%s %s: %q", c.Name, changing[c.Name], got)
			}
			for _, look := range c.Looks {
				if got := h.answer(conv, "bob", strings.TrimSpace("/"+c.Name+" "+look)); strings.HasPrefix(got, "Only an owner") {
					t.Errorf("member may not look with /%s %s: %q", c.Name, look, got)
				}
			}
		default: // anyone; owners or requester is refused only with someone else's run
			if got := h.answer(conv, "bob", "/"+c.Name); strings.HasPrefix(got, "Only an owner") {
				t.Errorf("member refused /%s: %q", c.Name, got)
			}
		}
	}
	// An owner is refused nothing.
	for _, c := range table {
		conv := chat.ConvRef{Platform: groupConv.Platform, Channel: groupConv.Channel, Thread: "owner-" + c.Name}
		text := strings.TrimSpace("/" + c.Name + " " + changing[c.Name])
		if got := h.answer(conv, "owner", text); strings.HasPrefix(got, "Only an owner") {
			t.Errorf("owner refused %s: %q", text, got)
		}
	}
	if h.model.Calls() != 0 {
		t.Fatal("a command reached the model")
	}
}

// The last paragraph of /help says in words who may do what in a group:
// it names each command whose group right is not "anyone", as the table
// says.
func TestHelpStatesTheGroupRights(t *testing.T) {
	owners, rest, _ := strings.Cut(gateway.GroupRightsNote, " are for owners;")
	onlyOwners, toChange, _ := strings.Cut(owners, "changing")
	for _, c := range gateway.CommandTable() {
		name := "`/" + c.Name + "`"
		var in string
		switch c.Group {
		case "anyone":
			continue
		case "owners":
			in = onlyOwners
		case "owners to change":
			in = toChange
		case "owners or requester":
			in = rest
		}
		if !strings.Contains(in, name) {
			t.Errorf("/help's group note does not say that /%s is for %s: %q", c.Name, c.Group, gateway.GroupRightsNote)
		}
	}
	// And it names no command whose right is another (the branch buttons
	// of /tree are buttons, not the command).
	group := map[string]string{}
	for _, c := range gateway.CommandTable() {
		group[c.Name] = c.Group
	}
	for part, want := range map[string]string{strings.ReplaceAll(onlyOwners, "the branch buttons of `/tree`", ""): "owners", toChange: "owners to change", rest: "owners or requester"} {
		for _, m := range regexp.MustCompile("`/([a-z]+)`").FindAllStringSubmatch(part, -1) {
			if group[m[1]] != want {
				t.Errorf("/help's group note says /%s is for %s; the table says %q", m[1], want, group[m[1]])
			}
		}
	}
}
