package e2e_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack"
	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// Slack ids of the e2e workspace.
const (
	slackTeam    = "T0001"
	slackOwner   = "UOWNER"
	slackBob     = "UBOB"    // a member of the allowed channel, not an owner
	slackOwnerDM = "D100"    // the owner's DM with the bot
	slackChannel = "C100"    // a channel in access.groups
	slackOther   = "C200"    // a channel that is not
	slackMention = "<@UBOT>" // how a mention of the bot reads
)

// slackWorld is a deployment on Slack: a fake Slack, a data directory and
// a scripted model, with pibot restartable on the same state.
type slackWorld struct {
	*world
	slack   *slacktest.Server
	mode    string
	events  string // the HTTP events URL (http mode)
	adapter *slack.Adapter
}

type slackOption func(*slackWorld)

func slackHTTP() slackOption { return func(w *slackWorld) { w.mode = slack.ModeHTTP } }
func slackTools(ts ...agent.Tool) slackOption {
	return func(w *slackWorld) { w.tools = ts }
}
func slackConfig(f func(*gateway.Config)) slackOption { return func(w *slackWorld) { w.cfgMod = f } }

// slackTimed serves the model through a timedModel.
func slackTimed() slackOption {
	return func(w *slackWorld) { w.timed = &timedModel{Model: w.model} }
}

// newSlackWorld starts a fake Slack and pibot with the Slack adapter. At
// the end it checks that no call came inside a Retry-After window and that
// no log line holds a token.
func newSlackWorld(t testing.TB, script []faux.Turn, opts ...slackOption) *slackWorld {
	t.Helper()
	w := &slackWorld{world: &world{
		t:     t,
		dir:   t.TempDir(),
		model: faux.New(llm.ModelInfo{ID: "m", Provider: "faux", ContextWindow: 100000, MaxTokens: 1000}, script...),
		policy: access.Policy{
			Owners:          []string{"slack:" + slackOwner},
			DMPolicy:        "pairing",
			MentionRequired: true,
			Groups:          []string{"slack:" + slackChannel},
		},
		logs: &logBuffer{},
	}}
	for _, o := range opts {
		o(w)
	}
	w.log = slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.slack = slacktest.New()
	t.Cleanup(w.slack.Close)
	w.start()
	t.Cleanup(func() {
		w.stop()
		if v := w.slack.Violations(); len(v) > 0 {
			t.Errorf("calls inside Retry-After windows: %q", v)
		}
		logs := w.logs.String()
		for _, s := range []string{w.slack.BotToken, w.slack.AppToken, w.slack.SigningSecret} {
			if strings.Contains(logs, s) {
				t.Errorf("a log line holds a Slack secret %.8s…", s)
			}
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("logs:\n%s", logs)
			t.Logf("Slack calls:\n%s", w.slackCalls())
		}
	})
	return w
}

// start runs a new pibot process on the world's state.
func (w *slackWorld) start() {
	t := w.t
	t.Helper()
	deps, inbox := localDeps(t, w.dir, w.policy)
	ad, err := slack.New(slack.Config{BotToken: secret.New(w.slack.BotToken), AppToken: secret.New(w.slack.AppToken),
		SigningSecret: secret.New(w.slack.SigningSecret), Mode: w.mode, APIURL: w.slack.APIURL, Logger: w.log,
		PingInterval: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.adapter = ad
	if w.mode == slack.ModeHTTP {
		mux := http.NewServeMux()
		mux.Handle("POST "+slack.EventsPath, ad.EventsHandler())
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		w.events = srv.URL + slack.EventsPath
	}
	// Counted before the gateway starts: the adapter may connect before
	// run returns.
	before := w.slack.Connections()
	w.run(deps, inbox, ad)
	if w.mode != slack.ModeHTTP {
		if err := w.slack.WaitConnected(before+1, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	} else {
		w.waitFor("the HTTP handler", func() bool {
			code, _ := w.post(w.slack.Request(w.events, []byte(`{"type":"url_verification","challenge":"x"}`), 0))
			return code == http.StatusOK
		})
		// The handler verifies before Run is ready; wait for the sink too.
		w.waitFor("the sink", func() bool {
			code, _ := w.post(w.slack.Request(w.events, []byte(`{"type":"event_callback","team_id":"T0001","event":{"type":"reaction_added"}}`), 0))
			return code == http.StatusOK
		})
	}
}

// post sends an HTTP delivery and returns the status and body.
func (w *slackWorld) post(r *http.Request) (int, string) {
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		w.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// deliver sends one delivery by the world's mode and waits until Slack
// has its acknowledgement.
func (w *slackWorld) deliver(kind string, body []byte) {
	w.t.Helper()
	if w.mode == slack.ModeHTTP {
		var payload any = body
		switch kind {
		case "interactive":
			payload = slacktest.Interaction(body)
		case "slash_commands":
			w.t.Fatal("use command")
		}
		if code, _ := w.post(w.slack.Request(w.events, payload, 0)); code != http.StatusOK {
			w.t.Fatalf("delivery answered HTTP %d", code)
		}
		return
	}
	id := w.slack.Deliver(kind, body)
	if err := w.slack.WaitAck(id, 10*time.Second); err != nil {
		w.t.Fatal(err)
	}
	if _, d := w.slack.Acked(id); d > 3*time.Second {
		w.t.Errorf("envelope acknowledged after %s, more than Slack's 3 s", d)
	}
}

// say posts a user message and delivers its events; it returns its ts.
func (w *slackWorld) say(m slacktest.Say) string {
	w.t.Helper()
	if m.User == "" {
		m.User = slackOwner
	}
	ts, bodies := w.slack.Post(m)
	for _, b := range bodies {
		w.deliver("events_api", b)
	}
	return ts
}

// command types the slash command /pi text in channel.
func (w *slackWorld) command(channel, user, text string) {
	w.t.Helper()
	v := w.slack.SlashCommand(channel, user, "/pi", text)
	if w.mode == slack.ModeHTTP {
		if code, _ := w.post(w.slack.Request(w.events, v, 0)); code != http.StatusOK {
			w.t.Fatalf("slash command answered HTTP %d", code)
		}
		return
	}
	w.deliver("slash_commands", slacktest.SlashJSON(v))
}

// press presses the button id of message ts as user.
func (w *slackWorld) press(channel, ts, user, id string) {
	w.t.Helper()
	payload, ok := w.slack.Press(channel, ts, user, id)
	if !ok {
		w.t.Fatalf("no button %q on %s", id, ts)
	}
	w.deliver("interactive", payload)
}

// botMessages returns the bot's visible messages in channel (and thread,
// if not "").
func (w *slackWorld) botMessages(channel, thread string) []slacktest.Message {
	var out []slacktest.Message
	for _, m := range w.slack.Messages(channel) {
		if m.User == w.slack.BotUserID && (thread == "" || m.ThreadTS == thread) {
			out = append(out, m)
		}
	}
	return out
}

// waitSlack waits for a bot message containing sub in channel (thread if
// not "") whose stream, if any, is stopped, and returns it.
func (w *slackWorld) waitSlack(channel, thread, sub string) slacktest.Message {
	w.t.Helper()
	var found slacktest.Message
	w.waitFor("a bot message with "+sub, func() bool {
		for _, m := range w.botMessages(channel, thread) {
			if strings.Contains(m.Text, sub) && (m.Stream == nil || m.Stream.Stopped) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// slackLoc is the gateway's location key of a Slack conversation.
func slackLoc(channel, thread string) string {
	return chat.ConvRef{Platform: "slack", Workspace: slackTeam, Channel: channel, Thread: thread}.Key()
}

func (w *slackWorld) slackCalls() string {
	var b strings.Builder
	var start time.Time
	for _, c := range w.slack.Calls() {
		if start.IsZero() {
			start = c.Time
		}
		b.WriteString(c.Time.Sub(start).Round(time.Millisecond).String() + " " + c.Method + " " + c.Error)
		for _, k := range []string{"channel", "ts", "thread_ts", "text", "markdown_text", "status"} {
			if v, ok := c.Params[k]; ok {
				if len(v) > 60 {
					v = v[:60] + "…"
				}
				b.WriteString(" " + k + "=" + v)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
