package e2e

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/adapters/slack"
	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/chat"
	gwstream "github.com/pibot/pibot/gateway/stream"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// growth is one call that made a streamed message grow, with the text the
// message shows after it.
type growth struct {
	method string
	at     time.Duration // since the model's first token
	text   string
}

// streamThread plays turn from a scripted model into a reply in a channel
// thread, through the stream controller and the adapter, against the fake
// Slack; time is the bubble's, so the timings are exact. It returns the
// streamed message's growth, when the model's last token came, and the
// final text of the message.
func streamThread(t *testing.T, srv *slacktest.Server, turn faux.Turn) (grew []growth, last time.Duration, final string) {
	t.Helper()
	client, stop := srv.InMemory()
	defer stop()
	a, err := slack.New(slack.Config{BotToken: secret.New(srv.BotToken), AppToken: secret.New(srv.AppToken),
		APIURL: srv.APIURL, HTTPClient: client, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	parent, _ := srv.Post(slacktest.Say{Channel: "C1", User: "U1", Text: "<@UBOT> explain"})
	conv := chat.ConvRef{Platform: "slack", Workspace: "T0001", Channel: "C1", Thread: parent}
	c := gwstream.New(a, conv, gwstream.Options{ReplyTo: &chat.MsgRef{Conv: conv, ID: parent}, Recipient: "U1"})
	ctx := t.Context()
	c.Start(ctx)

	model := faux.New(llm.ModelInfo{ID: "m"}, turn)
	var text string
	var first time.Time
	for ev := range model.Stream(ctx, llm.Request{}) {
		if ev.Type != llm.EventTextDelta {
			continue
		}
		if first.IsZero() {
			first = time.Now()
		}
		text += ev.Delta
		c.SetText(text)
	}
	last = time.Since(first)
	if _, err := c.Finish(ctx, chat.Out{Markdown: text}); err != nil {
		t.Fatal(err)
	}
	var shown string
	for _, call := range srv.Calls() {
		switch call.Method {
		case "chat.startStream", "chat.appendStream", "chat.stopStream":
			if call.Error != "" {
				t.Errorf("%s failed: %s", call.Method, call.Error)
			}
			if call.Params["markdown_text"] == "" {
				continue
			}
			shown += call.Params["markdown_text"]
			grew = append(grew, growth{call.Method, call.Time.Sub(first), shown})
		}
	}
	for _, g := range grew {
		t.Logf("%6.2fs %-17s %q", g.at.Seconds(), g.method, g.text)
	}
	if v := srv.Violations(); len(v) > 0 {
		t.Errorf("calls inside Retry-After windows: %v", v)
	}
	msgs := srv.Thread("C1", parent)
	if len(msgs) != 2 || msgs[1].Stream == nil || !msgs[1].Stream.Stopped {
		t.Fatalf("thread = %+v, want the question and one stopped stream", msgs)
	}
	if msgs[1].Text != shown {
		t.Errorf("the message shows %q, the calls added up to %q", msgs[1].Text, shown)
	}
	return grew, last, msgs[1].Text
}

// A one-paragraph answer that streams for about 6 s shows its first words
// within 1.5 s of the model's first token and then grows more than once a
// second, a word boundary at a time, until the model is done.
func TestThreadStreamsAParagraph(t *testing.T) {
	srv := slacktest.New() // its listener stays outside the bubble
	t.Cleanup(srv.Close)
	paragraph := strings.TrimSpace(strings.Repeat("The gateway keeps one session per thread and streams every answer as it is written, ", 4)) +
		" so that nobody waits for a whole paragraph to appear at once."
	synctest.Test(t, func(t *testing.T) {
		grew, last, final := streamThread(t, srv, faux.Text(paragraph).WithDelay(100*time.Millisecond))
		if final != paragraph {
			t.Fatalf("final text %q, want %q", final, paragraph)
		}
		if last < 5500*time.Millisecond {
			t.Fatalf("the model streamed for %v, want about 6 s", last)
		}
		if len(grew) == 0 || grew[0].method != "chat.startStream" || grew[0].at > 1500*time.Millisecond {
			t.Fatalf("first words: %+v, want chat.startStream within 1.5 s of the first token", grew)
		}
		live := 0
		for i, g := range grew {
			if !strings.HasPrefix(paragraph, g.text) {
				t.Errorf("shown %q is not a head of the answer", g.text)
			}
			if rest := paragraph[len(g.text):]; rest != "" && rest[0] != ' ' {
				t.Errorf("shown %q ends inside a word", g.text)
			}
			if i > 0 && g.at <= last {
				live++
				if gap := g.at - grew[i-1].at; gap > time.Second {
					t.Errorf("no growth for %v before %v (%s)", gap, g.at, g.method)
				}
			}
		}
		if gap := last - lastLive(grew, last); gap > time.Second {
			t.Errorf("no growth in the last %v the model wrote", gap)
		}
		if live < 6 {
			t.Errorf("%d appends while the model wrote for %v, want one a second at least", live, last)
		}
	})
}

// lastLive is when the last growth before the model's last token came.
func lastLive(grew []growth, last time.Duration) time.Duration {
	var at time.Duration
	for _, g := range grew {
		if g.at <= last {
			at = g.at
		}
	}
	return at
}

// A code block is never shown half-open, nor a table's row half-written
// or its header without the delimiter row, while the prose around them
// streams word by word.
func TestThreadStreamsWholeBlocks(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	answer := "Run the tests with the race detector before you push anything to the main branch:\n\n" +
		"```sh\ngo test -race -count=1 ./gateway/...\ngo vet ./...\nstaticcheck ./...\n```\n\n" +
		"The suites take about this long on two cores:\n\n" +
		"| suite | time |\n|-------|-----:|\n| stream | 5 s |\n| slack | 12 s |\n\n" +
		"After that, *push* and open the pull request for review."
	synctest.Test(t, func(t *testing.T) {
		grew, _, final := streamThread(t, srv, faux.Text(answer).WithDelay(150*time.Millisecond))
		if final != answer {
			t.Errorf("final text %q, want %q", final, answer)
		}
		beforeBlock := false
		for _, g := range grew {
			if n := strings.Count(g.text, "```"); n%2 != 0 {
				t.Errorf("%s shows a code block half-open: %q", g.method, g.text)
			}
			if strings.HasSuffix(g.text, "main branch:") {
				beforeBlock = true
			}
			for line := range strings.Lines(g.text) {
				line = strings.TrimRight(line, "\n")
				if strings.HasPrefix(line, "|") && !strings.HasSuffix(line, "|") {
					t.Errorf("%s shows a table row half-written: %q", g.method, g.text)
				}
			}
			if strings.Contains(g.text, "| suite |") && !strings.Contains(g.text, "|-------|-----:|") {
				t.Errorf("%s shows the table's header without its delimiter row: %q", g.method, g.text)
			}
			if strings.HasSuffix(g.text, "*push") {
				t.Errorf("%s shows an open emphasis: %q", g.method, g.text)
			}
		}
		if !beforeBlock {
			t.Errorf("the prose before the code block was not shown on its own: %+v", grew)
		}
	})
}
