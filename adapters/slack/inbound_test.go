package slack

import (
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/chat"
)

func TestPlainText(t *testing.T) {
	tests := []struct {
		in, want  string
		mentioned bool
	}{
		{"<@UBOT> hi there", "hi there", true},
		{"see <https://go.dev|the Go site> &amp; <https://x.test>", "see the Go site (https://go.dev) & https://x.test", false},
		{"ask <@U2> in <#C9|general>", "ask @U2 in #general", false},
		{"a &lt;b&gt; c", "a <b> c", false},
		{"<!here> look", "@here look", false},
		{"```\ncode <@UBOT>\n```", "```\ncode \n```", true},
	}
	for _, tt := range tests {
		got, m := plainText(tt.in, "UBOT")
		if got != tt.want || m != tt.mentioned {
			t.Errorf("plainText(%q) = %q, %v; want %q, %v", tt.in, got, m, tt.want, tt.mentioned)
		}
	}
}

// Messages map to conversations as the README's Slack section says: a
// DM's top level is the main line, a DM thread and every channel thread
// are threads; bots, the bot itself and edits are skipped; "!" commands
// work anywhere.
func TestEventMapping(t *testing.T) {
	h := newHarness(t, "")
	h.a.rd.setIdentity(identity{userID: "UBOT", botID: "BBOT", teamID: "T0001"})
	_ = h.a.RegisterCommands(t.Context(), []chat.CommandSpec{{Name: "model"}, {Name: "stop"}})
	top, _ := h.srv.Post(slacktest.Say{Channel: "D1", User: "U1", Text: "hello"})
	tests := []struct {
		name string
		say  slacktest.Say
		skip bool
		want func(t *testing.T, in chat.Inbound)
	}{
		{"dm main line", slacktest.Say{Channel: "D1", User: "U1", Text: "hi"}, false, func(t *testing.T, in chat.Inbound) {
			if !in.Conv.DM || in.Conv.Thread != "" || !in.Mentioned || in.Command != nil {
				t.Errorf("%+v", in)
			}
		}},
		{"dm thread", slacktest.Say{Channel: "D1", User: "U1", Text: "again", ThreadTS: top}, false, func(t *testing.T, in chat.Inbound) {
			if !in.Conv.DM || in.Conv.Thread != top {
				t.Errorf("conv %+v, want the thread of %s", in.Conv, top)
			}
		}},
		{"channel mention", slacktest.Say{Channel: "C1", User: "U1", Text: "<@UBOT> fix it"}, false, func(t *testing.T, in chat.Inbound) {
			if in.Conv.DM || in.Conv.Thread != "" || !in.Mentioned || in.Text != "fix it" {
				t.Errorf("%+v", in)
			}
		}},
		{"channel thread without mention", slacktest.Say{Channel: "C1", User: "U1", Text: "more", ThreadTS: top}, false, func(t *testing.T, in chat.Inbound) {
			if in.Mentioned || in.Conv.Thread != top {
				t.Errorf("%+v", in)
			}
		}},
		{"group dm is a channel", slacktest.Say{Channel: "G1", ChannelType: "mpim", User: "U1", Text: "hey"}, false, func(t *testing.T, in chat.Inbound) {
			if in.Conv.DM || in.Mentioned {
				t.Errorf("%+v", in)
			}
		}},
		{"bang command in a thread", slacktest.Say{Channel: "C1", User: "U1", Text: "!model openai/gpt-5", ThreadTS: top}, false, func(t *testing.T, in chat.Inbound) {
			if in.Command == nil || in.Command.Name != "model" || in.Command.Args != "openai/gpt-5" {
				t.Errorf("command %+v", in.Command)
			}
		}},
		{"bang before a word that is no command", slacktest.Say{Channel: "D1", User: "U1", Text: "!important: read this"}, false, func(t *testing.T, in chat.Inbound) {
			if in.Command != nil || in.Text != "!important: read this" {
				t.Errorf("command %+v, text %q", in.Command, in.Text)
			}
		}},
		{"own message", slacktest.Say{Channel: "D1", User: "UBOT", Text: "echo"}, true, nil},
		{"other bot", slacktest.Say{Channel: "D1", User: "U9", BotID: "B9", Text: "beep"}, true, nil},
		{"edited", slacktest.Say{Channel: "D1", User: "U1", Text: "x", Subtype: "message_changed"}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, bodies := h.srv.Post(tt.say)
			var keys []string
			for _, b := range bodies {
				in, err := h.a.rd.eventBody(b)
				if tt.skip {
					if err != errSkip {
						t.Fatalf("want skipped, got %+v, %v", in, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if in.Msg.ID != ts || in.DedupKey != dedupKey("T0001", tt.say.Channel, ts) {
					t.Errorf("msg %+v key %q", in.Msg, in.DedupKey)
				}
				keys = append(keys, in.DedupKey)
				tt.want(t, in)
			}
			if len(keys) == 2 && keys[0] != keys[1] {
				t.Errorf("message and app_mention keys differ: %q", keys)
			}
		})
	}
}

func TestSlashCommand(t *testing.T) {
	a := &reader{}
	tests := []struct {
		channel, text    string
		name, args, conv string
	}{
		{"D1", "model openai/gpt-5", "model", "openai/gpt-5", "slack:T1:D1"},
		{"D1", "", "help", "", "slack:T1:D1"},
		{"C1", "stop https://x.slack.com/archives/C1/p1700000000000100", "stop", "", "slack:T1:C1:1700000000.000100"},
		{"C1", "stop https://x.slack.com/archives/C1/p1700000000000200?thread_ts=1700000000.000100&cid=C1", "stop", "", "slack:T1:C1:1700000000.000100"},
		{"C1", "stop https://x.slack.com/archives/C2/p1700000000000100", "stop", "https://x.slack.com/archives/C2/p1700000000000100", "slack:T1:C1"},
	}
	for _, tt := range tests {
		in, err := a.slashCommand(slackapi.SlashCommand{TeamID: "T1", ChannelID: tt.channel, UserID: "U1", Command: "/pi",
			Text: tt.text, ResponseURL: "https://hooks.slack.com/x", TriggerID: "tr1"})
		if err != nil {
			t.Fatal(err)
		}
		if in.Command.Name != tt.name || in.Command.Args != tt.args || in.Conv.Key() != tt.conv {
			t.Errorf("%q: command %+v in %s; want %s %q in %s", tt.text, in.Command, in.Conv.Key(), tt.name, tt.args, tt.conv)
		}
		ix := in.Interaction
		if ix == nil || ix.ResponseURL == "" || ix.User != "U1" || time.Until(ix.Deadline) < 29*time.Minute {
			t.Errorf("interaction %+v", ix)
		}
	}
}

func TestResponseURLHosts(t *testing.T) {
	a := &answerer{apiHost: "127.0.0.1:9"}
	for u, want := range map[string]bool{
		"https://hooks.slack.com/commands/1": true, "http://127.0.0.1:9/response/1": true,
		"https://evil.test/x": false, "http://hooks.slack.com/x": false, "https://slack.com.evil.test/": false,
	} {
		if got := a.responseURLOK(u); got != want {
			t.Errorf("responseURLOK(%q) = %v", u, got)
		}
	}
}
