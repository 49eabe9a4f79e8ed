package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/providers/faux"
)

// In a channel thread, a one-paragraph answer the model writes for about
// 6 s shows its first words soon after the model's first token and grows
// word by word while the model writes, not at the end. Real time: the
// margins are wide; adapters/slack's TestThreadStreamsAParagraph checks
// the exact cadence on synctest's clock.
func TestSlackThreadStreamsWords(t *testing.T) {
	t.Parallel()
	const delay = 100 * time.Millisecond
	answer := "A thread shows the answer while the model writes it: the first words come within a second, " +
		"and then the message grows by a few words at a time, never cutting a word in half, until the " +
		"whole paragraph is there and the stream is stopped with nothing left to add to what it already shows."
	tokens := len(faux.Tokens(answer))
	w := newSlackWorld(t, []faux.Turn{faux.Text(answer).WithDelay(delay)}, slackTimed())
	q := w.say(slacktest.Say{Channel: slackChannel, User: slackBob, Text: slackMention + " how do threads stream?"})
	m := w.waitSlack(slackChannel, q, "already shows.")
	if m.Text != answer {
		t.Fatalf("the thread shows %q, want %q", m.Text, answer)
	}
	// faux waits delay before it starts and before every token: these are
	// the earliest the first and the last token can have come.
	first := w.timed.last().Add(2 * delay)
	last := first.Add(time.Duration(tokens-1) * delay)

	var shown string
	var at []time.Time // growth while the model wrote
	for _, c := range w.slack.Calls() {
		mine := c.Method == "chat.startStream" && c.Params["thread_ts"] == q ||
			(c.Method == "chat.appendStream" || c.Method == "chat.stopStream") && c.Params["ts"] == m.TS
		if !mine || c.Params["markdown_text"] == "" {
			continue
		}
		shown += c.Params["markdown_text"]
		if !strings.HasPrefix(answer, shown) || len(shown) < len(answer) && answer[len(shown)] != ' ' {
			t.Errorf("%s shows %q: not a head of the answer ending at a word", c.Method, shown)
		}
		if c.Time.Before(last) {
			at = append(at, c.Time)
		}
	}
	if len(at) == 0 || at[0].Sub(first) > 1500*time.Millisecond {
		t.Fatalf("no words within 1.5 s of the first token (growth while the model wrote: %v)", at)
	}
	// About 0.8 s apart; asked here: at least one growth every 2 s.
	if want := int(last.Sub(first) / (2 * time.Second)); len(at) < want {
		t.Errorf("the message grew %d times while the model wrote for %v, want %d at least", len(at), last.Sub(first), want)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap > 2*time.Second {
			t.Errorf("the message did not grow for %v while the model wrote", gap)
		}
	}
}
