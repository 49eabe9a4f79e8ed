package e2e_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/discord"
	"github.com/pibot/pibot/adapters/discord/discordtest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// The Discord deployment under test: one guild with a text channel, a DM.
const (
	dToken  = "MTAwMDAwMDAwMDAwMDAwMDAx.GdE2e.DiscordSecretPart_DoNotLog"
	dGuild  = "810000000000000001"
	dChan   = "810000000000000002"
	dDM     = "810000000000000003"
	dSecret = "DiscordSecretPart_DoNotLog"
)

var (
	// dOwner is the bot's owner; dMember is a member of the listed guild.
	dOwner  = discordtest.User{ID: "710000000000000001", Username: "olga"}
	dMember = discordtest.User{ID: "710000000000000002", Username: "bob"}
)

// dworld is a Discord deployment: the fake Discord, a data directory and
// a scripted model, served by an in-process pibot (gateway + adapter).
type dworld struct {
	*world
	dsrv *discordtest.Server
	ad   *discord.Adapter
}

// newDiscordWorld starts a fake Discord and pibot on a fresh data
// directory. At the end it stops pibot and checks that no call came
// inside a 429 window and no log line holds the token.
func newDiscordWorld(t *testing.T, script []faux.Turn, opts ...option) *dworld {
	t.Helper()
	w := &world{
		t:     t,
		dir:   t.TempDir(),
		model: faux.New(llm.ModelInfo{ID: "m", Provider: "faux", ContextWindow: 100000, MaxTokens: 1000}, script...),
		policy: access.Policy{
			Owners:          []string{"discord:" + dOwner.ID},
			DMPolicy:        "pairing",
			MentionRequired: true,
			Groups:          []string{"discord:" + dGuild},
		},
		logs: &logBuffer{},
	}
	for _, o := range opts {
		o(w)
	}
	w.log = slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dw := &dworld{world: w, dsrv: discordtest.New(dToken)}
	t.Cleanup(dw.dsrv.Close)
	dw.dsrv.AddChannel(dChan, dGuild, discordtest.ChannelText)
	dw.dsrv.AddChannel(dDM, "", discordtest.ChannelDM)
	dw.start()
	t.Cleanup(func() {
		dw.stop()
		if v := dw.dsrv.Violations(); len(v) > 0 {
			t.Errorf("Discord rule breaches: %q", v)
		}
		if logs := w.logs.String(); strings.Contains(logs, dSecret) {
			t.Error("a log line holds the Discord token")
		}
		if t.Failed() {
			t.Logf("logs:\n%s", w.logs.String())
			for _, c := range dw.dsrv.Calls() {
				t.Logf("%s %s %d %s", c.Method, c.Route, c.Status, c.Body)
			}
		}
	})
	return dw
}

// start runs a new pibot process on the world's state.
func (dw *dworld) start() {
	t := dw.t
	t.Helper()
	deps, inbox := localDeps(t, dw.dir, dw.policy)
	ad, err := discord.New(discord.Config{Token: secret.New(dToken), APIURL: dw.dsrv.URL, Guilds: []string{dGuild}, Logger: dw.log,
		StatePath: filepath.Join(dw.dir, "discord-gateway.json")})
	if err != nil {
		t.Fatal(err)
	}
	dw.ad = ad
	dw.run(deps, inbox, ad)
	select {
	case <-dw.dsrv.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("pibot did not connect to the Discord gateway")
	}
}

// say posts a message of u in channel and dispatches it; mention adds the
// bot's mention; reply names a message it replies to.
func (dw *dworld) say(channel string, u discordtest.User, text string, mention bool, reply string) *discordtest.Message {
	if mention {
		text = "<@" + dw.dsrv.Bot.ID + "> " + text
	}
	m := dw.dsrv.PostUser(channel, u, text, reply)
	dw.dsrv.DispatchMessage(m, mention)
	return m
}

// waitText waits until a bot message in channel contains sub, visible to
// user, and returns it.
func (dw *dworld) waitText(channel, user, sub string) discordtest.Message {
	dw.t.Helper()
	var found discordtest.Message
	dw.waitFor("a bot message with "+sub, func() bool {
		for _, m := range dw.dsrv.Messages(channel) {
			if m.Author.ID == dw.dsrv.Bot.ID && (m.Ephemeral == "" || m.Ephemeral == user) && strings.Contains(m.Content, sub) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// dLoc is the gateway's location key of a Discord channel or thread.
func dLoc(guild, channel, thread string, dm bool) string {
	return chat.ConvRef{Platform: "discord", Workspace: guild, Channel: channel, Thread: thread, DM: dm}.Key()
}
