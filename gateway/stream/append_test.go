package stream_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/gateway/stream"
)

// appendCaps are the caps of a platform whose native stream can only
// append (Slack's chat.appendStream); chattest enforces the rule.
func appendCaps(maxLen int) chat.Caps {
	c := caps(maxLen)
	c.NativeStream, c.AppendOnly = true, true
	return c
}

// checkAppendOnly fails the test when a stream call broke the append-only
// rule or the stream was shown something unfinished.
func checkAppendOnly(t *testing.T, calls []chattest.Call) {
	t.Helper()
	for _, call := range chattest.Filter(calls, chattest.MethodStreamUpdate, chattest.MethodStreamFinish) {
		if errors.Is(call.Err, chat.ErrNotAppend) {
			t.Errorf("%s broke the append-only rule: %q", call.Method, call.Text)
		}
		for _, bad := range []string{"▌", "⏳", "_retrying"} {
			if strings.Contains(call.Text, bad) {
				t.Errorf("%s shows unfinished %q: %q", call.Method, bad, call.Text)
			}
		}
		if !fencesBalanced(call.Text) {
			t.Errorf("%s shows an open code block: %q", call.Method, call.Text)
		}
	}
}

// TestAppendOnlyShowsFinishedBlocks: on an append-only stream the reply
// grows by whole finished blocks, live, while unfinished text and the
// running tool show on the status line only.
func TestAppendOnlyShowsFinishedBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(appendCaps(4000))
		reply := &chat.MsgRef{Conv: dm, ID: "u1"}
		c := stream.New(ad.Streaming(), dm, stream.Options{ReplyTo: reply, Recipient: "U1"})
		c.Start(t.Context())

		first := "Let me run the tests first, they take a while.\n\n"
		feed(c, strings.SplitAfter(first+"```sh\ngo test ./...\n\n", " "), 100*time.Millisecond)
		time.Sleep(2 * time.Second)
		if got, want := ad.Draft(dm), strings.TrimSpace(first); got != want {
			t.Errorf("draft while the code block is open = %q, want the finished paragraph %q", got, want)
		}
		c.SetText(first + "```sh\ngo test ./...\n```")
		c.EndMessage()
		c.ToolStart("1", "bash", cmd("go test ./..."))
		time.Sleep(7 * time.Second)
		if got := ad.Status(dm); got != "running bash…" {
			t.Errorf("status during the tool run = %q, want it out of band", got)
		}
		if strings.Contains(ad.Draft(dm), "bash") {
			t.Errorf("running tool shown on the stream: %q", ad.Draft(dm))
		}
		c.ToolEnd("1", false, "ok")
		c.Status("retrying (1/3) in 2s")
		synctest.Wait()
		if got := ad.Status(dm); got != "retrying (1/3) in 2s" {
			t.Errorf("status = %q, want the new status at once", got)
		}
		c.Status("")
		c.SetText("All green.")
		time.Sleep(2 * time.Second)
		if d := ad.Draft(dm); !strings.Contains(d, "✓ `bash · go test ./... · 7s`") {
			t.Errorf("finished tool line not appended live: %q", d)
		}
		refs, err := c.Finish(t.Context(), chat.Out{Buttons: [][]chat.Button{{{ID: "ok", Label: "OK"}}}})
		if err != nil {
			t.Fatal(err)
		}
		calls := ad.Calls()
		checkAppendOnly(t, calls)
		if n := len(chattest.Filter(calls, chattest.MethodSend, chattest.MethodEdit)); n != 0 {
			t.Errorf("%d send/edit calls on an append-only stream", n)
		}
		want := first + "```sh\ngo test ./...\n```\n\n✓ `bash · go test ./... · 7s`\n\nAll green."
		if len(refs) != 1 {
			t.Fatalf("refs = %v, want one", refs)
		}
		m, _ := ad.Message(refs[0])
		if m.Text != want || len(m.Buttons) != 1 || m.ReplyTo == nil || *m.ReplyTo != *reply {
			t.Errorf("final message = %+v, want %q with buttons, answering %v", m, want, reply)
		}
		opens := chattest.Filter(calls, chattest.MethodOpenStream)
		if len(opens) != 1 || opens[0].Recipient != "U1" {
			t.Errorf("stream opens = %+v, want one for recipient U1", opens)
		}
		if got := ad.Status(dm); got != "" {
			t.Errorf("status after Finish = %q, want cleared", got)
		}
	})
}

// TestAppendOnlySplitsIntoStreams: a reply longer than one message fills
// a stream, finishes it, and continues in a new one.
func TestAppendOnlySplitsIntoStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(appendCaps(200))
		c := stream.New(ad.Streaming(), dm, stream.Options{})
		c.Start(t.Context())
		var paras []string
		for i := range 12 {
			paras = append(paras, fmt.Sprintf("Paragraph %d says something of moderate length.", i))
		}
		for i := range paras {
			c.SetText(strings.Join(paras[:i+1], "\n\n") + "\n\nNext")
			time.Sleep(1500 * time.Millisecond)
		}
		c.SetText(strings.Join(paras, "\n\n"))
		refs, err := c.Finish(t.Context(), chat.Out{})
		if err != nil {
			t.Fatal(err)
		}
		calls := ad.Calls()
		checkAppendOnly(t, calls)
		msgs := ad.Messages(dm)
		if len(msgs) < 3 || len(refs) != len(msgs) {
			t.Fatalf("%d messages, %d refs; want >= 3 of each", len(msgs), len(refs))
		}
		for i, m := range msgs {
			if n := chat.Len(chat.Render(m, chat.DialectMarkdown), chat.DialectMarkdown); n > 200 {
				t.Errorf("message %d is %d long, limit 200", i, n)
			}
		}
		if got, want := strings.Join(msgs, "\n\n"), strings.Join(paras, "\n\n"); got != want {
			t.Errorf("messages = %q, want %q", got, want)
		}
		if strings.Contains(strings.Join(msgs, ""), "Next") {
			t.Errorf("an unfinished paragraph was shown: %q", msgs)
		}
	})
}

// TestAppendOnlyNeverRewrites: a final text that replaces what was shown
// is appended after it, never edited in.
func TestAppendOnlyNeverRewrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(appendCaps(4000))
		c := stream.New(ad.Streaming(), dm, stream.Options{})
		c.Start(t.Context())
		c.SetText("A first draft of the answer.")
		c.EndMessage()
		time.Sleep(2 * time.Second)
		if d := ad.Draft(dm); d != "A first draft of the answer." {
			t.Fatalf("draft = %q", d)
		}
		if _, err := c.Finish(t.Context(), chat.Out{Markdown: "The real answer."}); err != nil {
			t.Fatal(err)
		}
		checkAppendOnly(t, ad.Calls())
		if got, want := ad.Messages(dm), []string{"A first draft of the answer.\n\nThe real answer."}; len(got) != 1 || got[0] != want[0] {
			t.Errorf("messages = %q, want %q", got, want)
		}
	})
}

// TestAppendOnlyFallsBackToMessages: when the stream keeps failing, the
// whole reply still arrives, as plain messages.
func TestAppendOnlyFallsBackToMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(appendCaps(4000))
		ad.FailNext(chattest.MethodStreamUpdate, 1000, chattest.ErrServer)
		c := stream.New(ad.Streaming(), dm, stream.Options{})
		c.Start(t.Context())
		text := feed(c, words(100), 100*time.Millisecond)
		c.SetText(strings.ReplaceAll(text, "word50 ", "word50\n\n"))
		refs, err := c.Finish(t.Context(), chat.Out{})
		if err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSpace(strings.ReplaceAll(text, "word50 ", "word50\n\n"))
		if got := strings.Join(ad.Messages(dm), "\n\n"); got != want || len(refs) == 0 {
			t.Errorf("messages = %q (refs %v), want %q", got, refs, want)
		}
		if n := len(chattest.Filter(ad.Calls(), chattest.MethodSend)); n == 0 {
			t.Errorf("no message sent after the stream failed")
		}
	})
}

// TestVerboseExcerpt: Verbose shows the first ten lines of a tool's
// output, whole (not cut to one line), and a long command in full; Tools
// shows neither.
func TestVerboseExcerpt(t *testing.T) {
	var out strings.Builder
	for i := range 15 {
		fmt.Fprintf(&out, "line %02d of the output\n", i)
	}
	command := "go test -run 'TestAppendOnly|TestVerbose' -count=1 -race ./gateway/stream/ ./gateway/ ./chat/... ./adapters/term/"
	tests := []struct {
		v        stream.Verbosity
		want     []string
		dontWant []string
	}{
		{stream.Verbose,
			[]string{"```\nline 00 of the output\nline 01", "line 09 of the output\n…\n```", command},
			[]string{"line 10"}},
		{stream.Tools,
			[]string{"✓ `bash · go test -run"},
			[]string{"line 00", "./adapters/term/"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.v), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ad := newAdapter(caps(4000))
				c := stream.New(ad, dm, stream.Options{Verbosity: tt.v})
				c.Start(t.Context())
				c.ToolStart("1", "bash", cmd(command))
				time.Sleep(time.Second)
				c.ToolEnd("1", false, out.String())
				if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
					t.Fatal(err)
				}
				got := ad.LastText(dm)
				for _, w := range tt.want {
					if !strings.Contains(got, w) {
						t.Errorf("reply lacks %q:\n%s", w, got)
					}
				}
				for _, w := range tt.dontWant {
					if strings.Contains(got, w) {
						t.Errorf("reply shows %q:\n%s", w, got)
					}
				}
			})
		})
	}
}

// TestVerboseArgs: a tool without a command, path, pattern or name shows
// its arguments as JSON in Verbose, and only its name in Tools.
func TestVerboseArgs(t *testing.T) {
	tests := []struct {
		v    stream.Verbosity
		want string
	}{
		{stream.Verbose, "✓ `fetch · {\"url\":\"https://example.com/a\"} · 1s`"},
		{stream.Tools, "✓ `fetch · 1s`"},
	}
	for _, tt := range tests {
		t.Run(string(tt.v), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ad := newAdapter(caps(4000))
				c := stream.New(ad, dm, stream.Options{Verbosity: tt.v})
				c.ToolStart("1", "fetch", args("url", "https://example.com/a"))
				time.Sleep(time.Second)
				c.ToolEnd("1", false, "")
				if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
					t.Fatal(err)
				}
				if got := ad.LastText(dm); got != tt.want {
					t.Errorf("reply = %q, want %q", got, tt.want)
				}
			})
		})
	}
}
