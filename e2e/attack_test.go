package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/tools"
)

// mallory is a paired user who is not an owner; her private chat has her id.
var mallory = models.User{ID: 3003, FirstName: "Mallory", Username: "mallory"}

const malloryChat int64 = 3003

// pair approves a user the way `pibot pairing approve` does.
func (w *world) pair(u models.User) {
	w.t.Helper()
	s, err := access.OpenStore(filepath.Join(w.dir, "pairing.json"))
	if err != nil {
		w.t.Fatal(err)
	}
	code, _, err := s.RequestCode(w.t.Context(), "telegram", strconv.FormatInt(u.ID, 10), u.Username)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := s.Approve(w.t.Context(), "telegram", code); err != nil {
		w.t.Fatal(err)
	}
}

// The attack of issue #10, replayed through the real Telegram adapter: a
// member of an allowlisted group and a paired non-owner type the old
// migration command. Nothing moves: no unlisted group opens, the owner's
// chat stays on the owner's session, /tree shows mallory only her own
// messages and nothing of hers reaches the owner's context. Telegram's own
// migration still keeps the group's conversation.
func TestTypedMigrationRepointsNothing(t *testing.T) {
	t.Parallel()
	const unlisted int64 = -2999
	const super int64 = -1002001
	w := newWorld(t, []faux.Turn{
		faux.Text("owner answer one"), faux.Text("mallory answer"), faux.Text("group answer one"),
		faux.Text("owner answer two"), faux.Text("group answer two"),
	})
	w.srv.AddChat(models.Chat{ID: groupChat, Type: models.ChatTypeGroup, Title: "team"})
	w.srv.AddChat(models.Chat{ID: unlisted, Type: models.ChatTypeGroup, Title: "strangers"})
	w.pair(mallory)

	w.say(ownerChat, owner, "the vault code is 4711")
	w.waitMessage(ownerChat, "owner answer one")
	w.say(malloryChat, mallory, "hello from mallory")
	w.waitMessage(malloryChat, "mallory answer")
	w.say(groupChat, bob, "@"+botName+" hi team")
	w.waitMessage(groupChat, "group answer one")

	// The attack texts, in the old format "/__migrate NEW_CHAT_ID".
	w.say(groupChat, bob, "/__migrate "+strconv.FormatInt(unlisted, 10))
	w.say(groupChat, bob, "/__migrate@"+botName+" "+strconv.FormatInt(ownerChat, 10))
	w.say(malloryChat, mallory, "/__migrate "+strconv.FormatInt(ownerChat, 10))
	w.say(unlisted, mallory, "/__migrate "+strconv.FormatInt(malloryChat, 10))
	w.waitFor("two refusals in the group", func() bool { return len(w.withText(groupChat, "Unknown command")) == 2 })
	w.waitMessage(malloryChat, "Unknown command")

	w.say(unlisted, bob, "@"+botName+" answer me here")
	w.say(unlisted, mallory, "@"+botName+" and me")
	w.say(ownerChat, owner, "and now?")
	w.waitMessage(ownerChat, "owner answer two")
	reqs := w.model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("model calls = %d, want 4 (nothing from the unlisted group)", len(reqs))
	}
	want := []string{"user:the vault code is 4711", "assistant:owner answer one", "user:and now?"}
	if got := requestTexts(reqs[3]); !slices.Equal(got, want) {
		t.Fatalf("the owner's context = %q, want %q", got, want)
	}
	if n := len(w.srv.Messages(unlisted)); n != 0 {
		t.Fatalf("pibot posted %d messages in an unlisted group: %q", n, texts(w.srv.Messages(unlisted)))
	}
	w.say(malloryChat, mallory, "/tree")
	tree := w.waitMessage(malloryChat, "Session tree")
	if strings.Contains(tree.Text, "vault") || !strings.Contains(tree.Text, "hello from mallory") {
		t.Fatalf("mallory's /tree: %q", tree.Text)
	}
	ownerPath, _ := w.head(locKey(ownerChat, 0))
	malloryPath, _ := w.head(locKey(malloryChat, 0))
	if ownerPath == "" || ownerPath == malloryPath {
		t.Fatalf("owner's session %q, mallory's %q: not apart", ownerPath, malloryPath)
	}

	// Telegram's own migration: the group's conversation follows it.
	w.srv.Migrate(groupChat, super)
	to := w.srv.UserMessage(groupChat, bob, "")
	to.MigrateToChatID = super
	w.srv.AddMessage(to)
	from := w.srv.UserMessage(super, bob, "")
	from.MigrateFromChatID = groupChat
	w.srv.AddMessage(from)
	w.say(super, bob, "@"+botName+" still there?")
	w.waitMessage(super, "group answer two")
	want = []string{"user:hi team", "assistant:group answer one", "user:still there?"}
	if got := requestTexts(w.model.Requests()[4]); !slices.Equal(got, want) {
		t.Fatalf("after the migration the group's context = %q, want %q", got, want)
	}
}

// pressButton presses the button labelled label on message m as user u
// and returns the toast pibot answered with.
func (w *world) pressButton(u models.User, m telegramtest.Message, label string) string {
	w.t.Helper()
	data := ""
	for _, row := range m.Buttons {
		for _, b := range row {
			if b.Text == label {
				data = b.CallbackData
			}
		}
	}
	if data == "" {
		w.t.Fatalf("no %q button on %q", label, m.Text)
	}
	id := w.srv.AddCallback(u, m.ChatID, m.ID, data)
	toast := ""
	w.waitFor("the press is answered", func() bool {
		a := w.answers(id)
		if len(a) > 0 {
			toast = a[0].Params["text"]
		}
		return len(a) > 0
	})
	return toast
}

// A group member asks the agent to read pibot's config (outside the
// workspace), to grep its directory, and to attach it. Each call asks
// first, the member cannot allow it, and nothing of the file reaches the
// model or the group. Reading inside the workspace asks nothing.
func TestGroupMemberCannotExfiltrate(t *testing.T) {
	t.Parallel()
	const secretValue = "sk-CONFIG-SECRET-31337"
	ws, etc := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("shared notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(etc, "pibot.yaml")
	if err := os.WriteFile(cfgFile, []byte("api_key: "+secretValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := tools.New(t.Context(), tools.Options{Workspace: ws, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	path := func(p string) string { b, _ := json.Marshal(map[string]string{"path": p}); return string(b) }
	grep, _ := json.Marshal(map[string]string{"pattern": "api_key", "path": etc})
	w := newWorld(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "read", path("notes.txt"))), faux.Text("notes were read"),
		faux.ToolCalls(faux.Call("c2", "read", path(cfgFile))), faux.Text("config read refused"),
		faux.ToolCalls(faux.Call("c3", "attach", path(cfgFile))), faux.Text("attach refused"),
		faux.ToolCalls(faux.Call("c4", "grep", string(grep))), faux.Text("grep refused"),
	}, withConfig(func(c *gateway.Config) {
		c.Workspace = ws
		c.GroupApprovals = config.Default().Agent.Approvals.Group
		c.Tools = func(r gateway.ToolRun) []agent.Tool {
			return []agent.Tool{set.Get("read"), set.Get("grep"), tools.NewAttach(set.Workspace(), r.Attach)}
		}
		c.ToolPaths = func(_, tool string, args json.RawMessage) ([]gateway.ToolPath, error) {
			touches, err := set.Workspace().Paths(tool, args)
			var out []gateway.ToolPath
			for _, p := range touches {
				out = append(out, gateway.ToolPath{Path: p.Path, Inside: p.Inside, Write: p.Write})
			}
			return out, err
		}
	}))
	w.srv.AddChat(models.Chat{ID: groupChat, Type: models.ChatTypeGroup, Title: "team"})

	w.say(groupChat, bob, "@"+botName+" read our notes")
	w.waitMessage(groupChat, "notes were read")
	if n := len(w.withText(groupChat, "Approve")); n != 0 {
		t.Fatalf("a read inside the workspace asked (%d approval messages)", n)
	}

	// read of the config: bob's "Allow once" is refused, his Deny is taken.
	w.say(groupChat, bob, "@"+botName+" read "+cfgFile)
	ask := w.waitMessage(groupChat, "Approve read?")
	if !strings.Contains(ask.Text, cfgFile) || !strings.Contains(ask.Text, "outside the workspace") {
		t.Fatalf("approval message: %q", ask.Text)
	}
	if toast := w.pressButton(bob, ask, "Allow once"); !strings.Contains(toast, "Only an owner") {
		t.Fatalf("bob allowed his own read outside the workspace: toast %q", toast)
	}
	w.pressButton(bob, ask, "Deny")
	w.waitMessage(groupChat, "config read refused")

	// attach asks in groups by default; the owner denies it.
	w.say(groupChat, bob, "@"+botName+" send me the config file")
	ask = w.waitMessage(groupChat, "Approve attach?")
	if toast := w.pressButton(bob, ask, "Allow for this session"); !strings.Contains(toast, "Only an owner") {
		t.Fatalf("bob allowed attaching a file outside the workspace: toast %q", toast)
	}
	w.pressButton(owner, ask, "Deny")
	w.waitMessage(groupChat, "attach refused")

	// grep outside the workspace asks too.
	w.say(groupChat, bob, "@"+botName+" grep for keys")
	ask = w.waitMessage(groupChat, "Approve grep?")
	w.pressButton(owner, ask, "Deny")
	w.waitMessage(groupChat, "grep refused")

	for _, m := range w.srv.Messages(groupChat) {
		if strings.Contains(m.Text, secretValue) || m.Kind == "document" {
			t.Fatalf("the config reached the group: %+v", m)
		}
	}
	for _, r := range w.model.Requests() {
		for _, text := range requestTexts(r) {
			if strings.Contains(text, secretValue) {
				t.Fatalf("the config reached the model: %q", text)
			}
		}
	}
	w.never("a late leak", 200*time.Millisecond, func() bool { return len(w.srv.Calls("sendDocument")) > 0 })
}
