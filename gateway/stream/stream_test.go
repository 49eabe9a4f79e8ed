package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/gateway/stream"
)

var dm = chat.ConvRef{Platform: "test", Channel: "42", DM: true}

func caps(maxLen int) chat.Caps {
	return chat.Caps{
		Dialect:       chat.DialectMarkdown,
		MaxLen:        maxLen,
		EditInterval:  time.Second,
		TypingRefresh: 4 * time.Second,
	}
}

func newAdapter(c chat.Caps, opts ...chattest.Option) *chattest.Adapter {
	return chattest.New(append([]chattest.Option{chattest.WithCaps(c, c)}, opts...)...)
}

// words returns n words of prose.
func words(n int) []string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("word%d ", i)
	}
	return w
}

// feed streams ws into c, one every step, and returns the full text.
func feed(c *stream.Controller, ws []string, step time.Duration) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(w)
		c.SetText(b.String())
		time.Sleep(step)
	}
	return b.String()
}

// cmd and path are tool arguments.
func cmd(c string) json.RawMessage  { return args("command", c) }
func path(p string) json.RawMessage { return args("path", p) }

func args(k, v string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{k: v})
	return b
}

func outbound(calls []chattest.Call) []chattest.Call {
	return chattest.Filter(calls, chattest.MethodSend, chattest.MethodEdit,
		chattest.MethodStreamUpdate, chattest.MethodStreamFinish)
}

func checkNoViolations(t *testing.T, ad *chattest.Adapter) {
	t.Helper()
	for _, v := range ad.Violations() {
		t.Errorf("call %s at %s before retry-after ended at %s", v.Call.Method, v.Call.Time.Format(time.StampMilli), v.Until.Format(time.StampMilli))
	}
}

func joinMessages(ad *chattest.Adapter, conv chat.ConvRef) string {
	return strings.Join(ad.Messages(conv), "")
}

func TestCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(caps(4000))
		c := stream.New(ad, dm, stream.Options{})
		c.Start(t.Context())
		text := feed(c, words(200), 50*time.Millisecond) // 10 s of deltas
		refs, err := c.Finish(t.Context(), chat.Out{})
		if err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSpace(text)
		if got := ad.Messages(dm); len(got) != 1 || got[0] != want {
			t.Fatalf("messages = %q, want [%q]", got, want)
		}
		if len(refs) != 1 {
			t.Errorf("refs = %v, want one", refs)
		}
		calls := outbound(ad.Calls())
		if len(calls) < 5 || len(calls) > 13 {
			t.Errorf("%d send/edit calls for 200 deltas over 10 s, want about one per second", len(calls))
		}
		for i := 1; i < len(calls)-1; i++ {
			if gap := calls[i].Time.Sub(calls[i-1].Time); gap < time.Second {
				t.Errorf("calls %d and %d only %s apart", i-1, i, gap)
			}
		}
		for _, call := range calls[:len(calls)-1] {
			if !strings.HasSuffix(call.Text, "▌") {
				t.Errorf("intermediate text %q has no cursor", call.Text)
			}
		}
	})
}

func TestFirstPostWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(caps(4000))
		c := stream.New(ad, dm, stream.Options{})
		c.Start(t.Context())
		start := time.Now()
		c.SetText("Hi")
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if n := len(outbound(ad.Calls())); n != 0 {
			t.Fatalf("posted %d times after 2 chars and 0.1 s", n)
		}
		time.Sleep(time.Second)
		calls := outbound(ad.Calls())
		if len(calls) != 1 {
			t.Fatalf("calls = %d after 1.1 s, want 1", len(calls))
		}
		if d := calls[0].Time.Sub(start); d < 800*time.Millisecond {
			t.Errorf("first post after %s, want >= 0.8 s", d)
		}
		if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRateLimitHonoured(t *testing.T) {
	run := func(t *testing.T, limited bool) int {
		var n int
		synctest.Test(t, func(t *testing.T) {
			ad := newAdapter(caps(4000))
			if limited {
				ad.FailNext(chattest.MethodEdit, 1, chattest.RateLimited(5*time.Second))
			}
			c := stream.New(ad, dm, stream.Options{})
			c.Start(t.Context())
			text := feed(c, words(300), 50*time.Millisecond)
			if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
				t.Fatal(err)
			}
			checkNoViolations(t, ad)
			if got, want := ad.LastText(dm), strings.TrimSpace(text); got != want {
				t.Errorf("final text = %q, want %q", got, want)
			}
			calls := ad.Calls()
			for i, call := range calls {
				if call.Err == nil || i+1 == len(calls) {
					continue
				}
				if gap := calls[i+1].Time.Sub(call.Time); gap < 5*time.Second {
					t.Errorf("next call %s after a 429, want >= 5s", gap)
				}
			}
			n = len(calls)
		})
		return n
	}
	plain := run(t, false)
	limited := run(t, true)
	if limited >= plain {
		t.Errorf("%d calls with a 429, %d without; want fewer", limited, plain)
	}
}

func TestRateModelNoViolations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(caps(300), chattest.WithRateLimit(chattest.RateLimit{Max: 3, Window: 10 * time.Second}))
		c := stream.New(ad, dm, stream.Options{})
		c.Start(t.Context())
		text := feed(c, words(150), 100*time.Millisecond)
		if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
			t.Fatal(err)
		}
		checkNoViolations(t, ad)
		if got, want := joinMessages(ad, dm), strings.Join(strings.Fields(text), ""); strings.Join(strings.Fields(got), "") != want {
			t.Errorf("delivered %q, want %q", got, want)
		}
	})
}

func TestNotFoundContinuesInNewMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(caps(4000))
		c := stream.New(ad, dm, stream.Options{})
		c.Start(t.Context())
		feed(c, words(10), 100*time.Millisecond)
		first := c.Refs()
		if len(first) != 1 {
			t.Fatalf("refs = %v, want one", first)
		}
		if err := ad.Delete(t.Context(), first[0]); err != nil {
			t.Fatal(err)
		}
		text := feed(c, words(30), 100*time.Millisecond)
		refs, err := c.Finish(t.Context(), chat.Out{})
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) != 1 || refs[0] == first[0] {
			t.Errorf("refs = %v, want one new message", refs)
		}
		if got := ad.Messages(dm); len(got) != 1 || got[0] != strings.TrimSpace(text) {
			t.Errorf("messages = %q", got)
		}
		if len(chattest.Filter(ad.Calls(), chattest.MethodSend)) != 2 {
			t.Errorf("want exactly one follow-on message")
		}
	})
}

// fencesBalanced reports whether every code fence opened in md is closed.
func fencesBalanced(md string) bool {
	n := 0
	for line := range strings.Lines(md) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			n++
		}
	}
	return n%2 == 0
}

func TestSplitsIntoFollowOnMessages(t *testing.T) {
	var b strings.Builder
	b.WriteString("Here is the plan for the change, explained step by step.\n\n")
	b.WriteString("```go\n")
	for i := range 20 {
		fmt.Fprintf(&b, "fmt.Println(%d) // line\n", i)
	}
	b.WriteString("```\n\nThat is all, the tests pass and the build is green.")
	text := b.String()
	const maxLen = 200
	for _, chunk := range chat.Split(text, chat.DialectMarkdown, maxLen*9/10) {
		if !fencesBalanced(chunk) {
			t.Skip("chat.Split does not keep code fences whole yet")
		}
	}
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(caps(maxLen))
		c := stream.New(ad, dm, stream.Options{})
		c.Start(t.Context())
		for i := 0; i < len(text); i += 7 {
			c.SetText(text[:i])
			time.Sleep(100 * time.Millisecond)
		}
		c.SetText(text)
		refs, err := c.Finish(t.Context(), chat.Out{})
		if err != nil {
			t.Fatal(err)
		}
		msgs := ad.Messages(dm)
		if len(msgs) < 3 || len(refs) != len(msgs) {
			t.Fatalf("%d messages, %d refs; want >= 3 of each", len(msgs), len(refs))
		}
		for i, m := range msgs {
			if n := chat.Len(chat.Render(m, chat.DialectMarkdown), chat.DialectMarkdown); n > maxLen {
				t.Errorf("message %d is %d long, limit %d", i, n, maxLen)
			}
			if !fencesBalanced(m) {
				t.Errorf("message %d breaks a code fence:\n%s", i, m)
			}
			if strings.Contains(m, "▌") {
				t.Errorf("message %d keeps the cursor", i)
			}
		}
		for _, call := range ad.Calls() {
			if !fencesBalanced(strings.TrimSuffix(call.Text, "▌")) {
				t.Errorf("%s sent a broken fence:\n%s", call.Method, call.Text)
			}
		}
		if !strings.Contains(msgs[len(msgs)-1], "build is green") {
			t.Errorf("last message %q lacks the end of the text", msgs[len(msgs)-1])
		}
	})
}

func TestFinalDeliveredWhenEditsFail(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"server errors", chattest.ErrServer},
		{"rate limits", chattest.RateLimited(2 * time.Second)},
		{"not found", chat.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ad := newAdapter(caps(4000))
				ad.FailNext(chattest.MethodEdit, 1000, tt.err)
				c := stream.New(ad, dm, stream.Options{Verbosity: stream.Quiet})
				c.Start(t.Context())
				text := feed(c, words(100), 100*time.Millisecond)
				refs, err := c.Finish(t.Context(), chat.Out{Buttons: [][]chat.Button{{{ID: "ok", Label: "OK"}}}})
				if err != nil {
					t.Fatal(err)
				}
				checkNoViolations(t, ad)
				last := refs[len(refs)-1]
				m, _ := ad.Message(last)
				if m.Text != strings.TrimSpace(text) || len(m.Buttons) != 1 {
					t.Errorf("last message = %q with %d button rows, want the full text with buttons", m.Text, len(m.Buttons))
				}
				if n := len(chattest.Filter(ad.Calls(), chattest.MethodSend)); n > 4 {
					t.Errorf("%d messages sent while edits failed, want few", n)
				}
			})
		})
	}
}

// TestToolDurationExcludesApproval: a tool that waited a minute for its
// approval and then ran 2 s shows 2 s.
func TestToolDurationExcludesApproval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(caps(4000))
		c := stream.New(ad, dm, stream.Options{Verbosity: stream.Tools})
		c.Start(t.Context())
		c.ToolStart("1", "bash", cmd("make"))
		time.Sleep(time.Minute) // waiting for the approval
		c.ToolResumed("1")
		time.Sleep(2 * time.Second)
		c.ToolEnd("1", false, "ok")
		c.ToolResumed("1") // ended: no effect
		refs, err := c.Finish(t.Context(), chat.Out{Markdown: "Done."})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := ad.Message(refs[0])
		if !strings.Contains(m.Text, "bash · make · 2s") {
			t.Errorf("tool line %q, want 2s", m.Text)
		}
	})
}

func TestToolLines(t *testing.T) {
	tests := []struct {
		v        stream.Verbosity
		want     []string
		dontWant []string
	}{
		{stream.Quiet, []string{"All green."}, []string{"bash", "PASS", "thinking"}},
		{stream.Tools, []string{"✓ `bash · go test ./... · 12s`", "✗ `read · x.go · 0.5s` — no such file", "All green."}, []string{"PASS", "let me"}},
		{stream.Verbose, []string{"✓ `bash · go test ./... · 12s`", "```\nPASS\n```", "> 💭 let me run the tests", "All green."}, nil},
	}
	for _, tt := range tests {
		t.Run(string(tt.v), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ad := newAdapter(caps(4000))
				c := stream.New(ad, dm, stream.Options{Verbosity: tt.v})
				c.Start(t.Context())
				c.SetThinking("let me run the tests")
				c.EndMessage()
				c.ToolStart("1", "bash", cmd("go test ./..."))
				time.Sleep(12 * time.Second)
				c.ToolEnd("1", false, "PASS")
				c.ToolStart("2", "read", path("x.go"))
				time.Sleep(500 * time.Millisecond)
				c.ToolEnd("2", true, "no such file\nmore detail")
				c.SetText("All green.")
				if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
					t.Fatal(err)
				}
				got := joinMessages(ad, dm)
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

func TestRunningToolShowsElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(caps(4000))
		c := stream.New(ad, dm, stream.Options{})
		c.Start(t.Context())
		c.ToolStart("1", "bash", cmd("make"))
		time.Sleep(11 * time.Second)
		if got := ad.LastText(dm); got != "⏳ `bash · make · 10s…` ▌" {
			t.Errorf("live text = %q", got)
		}
		c.ToolEnd("1", false, "")
		if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
			t.Fatal(err)
		}
		if got := ad.LastText(dm); got != "✓ `bash · make · 11s`" {
			t.Errorf("final text = %q", got)
		}
	})
}

func TestNativeStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := caps(4000)
		cp.NativeStream = true
		ad := newAdapter(cp)
		reply := &chat.MsgRef{Conv: dm, ID: "u1"}
		c := stream.New(ad.Streaming(), dm, stream.Options{ReplyTo: reply})
		c.Start(t.Context())
		text := feed(c, words(60), 100*time.Millisecond)
		refs, err := c.Finish(t.Context(), chat.Out{})
		if err != nil {
			t.Fatal(err)
		}
		calls := ad.Calls()
		if n := len(chattest.Filter(calls, chattest.MethodSend, chattest.MethodEdit)); n != 0 {
			t.Errorf("%d send/edit calls on a native stream", n)
		}
		updates := chattest.Filter(calls, chattest.MethodStreamUpdate)
		if len(updates) < 3 || len(updates) > 8 {
			t.Errorf("%d stream updates over 6 s", len(updates))
		}
		if len(refs) != 1 {
			t.Fatalf("refs = %v", refs)
		}
		m, _ := ad.Message(refs[0])
		if m.Text != strings.TrimSpace(text) || m.ReplyTo == nil || *m.ReplyTo != *reply {
			t.Errorf("final message = %+v", m)
		}
	})
}

func TestNativeStreamFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := caps(4000)
		cp.NativeStream = true
		ad := newAdapter(cp)
		ad.FailNext(chattest.MethodStreamUpdate, 1, chattest.ErrServer)
		c := stream.New(ad.Streaming(), dm, stream.Options{})
		c.Start(t.Context())
		text := feed(c, words(60), 100*time.Millisecond)
		if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
			t.Fatal(err)
		}
		calls := ad.Calls()
		if len(chattest.Filter(calls, chattest.MethodStreamAbort)) != 1 || len(chattest.Filter(calls, chattest.MethodSend)) != 1 {
			t.Errorf("want one aborted stream and one sent message; calls: %v", methods(calls))
		}
		if got := ad.Messages(dm); len(got) != 1 || got[0] != strings.TrimSpace(text) {
			t.Errorf("messages = %q", got)
		}
	})
}

func methods(calls []chattest.Call) []chattest.Method {
	var m []chattest.Method
	for _, c := range calls {
		m = append(m, c.Method)
	}
	return m
}

func TestTyping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(caps(4000))
		c := stream.New(ad, dm, stream.Options{})
		c.Start(t.Context())
		time.Sleep(10 * time.Second)
		if n := len(chattest.Filter(ad.Calls(), chattest.MethodStatus)); n != 3 {
			t.Errorf("%d status calls in 10 s at a 4 s refresh, want 3", n)
		}
		c.SetText("The answer is forty-two, as everybody knows.")
		time.Sleep(20 * time.Second)
		if n := len(chattest.Filter(ad.Calls(), chattest.MethodStatus)); n != 3 {
			t.Errorf("%d status calls after the first output, want still 3", n)
		}
		c.ToolStart("1", "bash", cmd("sleep 30"))
		time.Sleep(10 * time.Second)
		if n := len(chattest.Filter(ad.Calls(), chattest.MethodStatus)); n < 5 {
			t.Errorf("%d status calls during a tool run, want refreshes", n)
		}
		if got := ad.Status(dm); got != "running bash…" {
			t.Errorf("status = %q", got)
		}
		c.ToolEnd("1", false, "")
		if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
			t.Fatal(err)
		}
		if got := ad.Status(dm); got != "" {
			t.Errorf("status after Finish = %q, want cleared", got)
		}
	})
}

func TestAbortKeepsText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(caps(4000))
		c := stream.New(ad, dm, stream.Options{})
		c.Start(t.Context())
		c.SetText("I was about to explain the whole")
		c.Status("retrying (1/3) in 2s")
		time.Sleep(3 * time.Second)
		refs, err := c.Abort(t.Context(), "⏹ stopped")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ad.Messages(dm), []string{"I was about to explain the whole\n\n⏹ stopped"}; len(got) != 1 || got[0] != want[0] || len(refs) != 1 {
			t.Errorf("messages = %q, refs %v; want %q", got, refs, want)
		}
		if _, err := c.Finish(t.Context(), chat.Out{}); !errors.Is(err, stream.ErrFinished) {
			t.Errorf("Finish after Abort: %v, want ErrFinished", err)
		}
	})
}

func TestFinalMarkdownAndWaitCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(caps(4000))
		c := stream.New(ad, dm, stream.Options{FinalWait: 30 * time.Second})
		c.Start(t.Context())
		feed(c, words(20), 100*time.Millisecond)
		ad.FailNext(chattest.MethodEdit, 1, chattest.RateLimited(20*time.Second))
		ad.FailNext(chattest.MethodSend, 1, chattest.RateLimited(40*time.Second))
		start := time.Now()
		_, err := c.Finish(t.Context(), chat.Out{Markdown: "Final **answer**."})
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 20*time.Second {
			t.Errorf("Finish returned after %s, want the 20 s retry-after waited out", d)
		}
		if got := ad.LastText(dm); got != "Final **answer**." {
			t.Errorf("final = %q", got)
		}
		checkNoViolations(t, ad)

		ad2 := newAdapter(caps(4000))
		c2 := stream.New(ad2, dm, stream.Options{FinalWait: 30 * time.Second})
		ad2.FailNext(chattest.MethodSend, 1, chattest.RateLimited(time.Minute))
		if _, err := c2.Finish(t.Context(), chat.Out{Markdown: "x"}); !errors.Is(err, chat.ErrRateLimited) && err == nil {
			t.Errorf("Finish past FinalWait: err = %v, want an error", err)
		}
		checkNoViolations(t, ad2)
	})
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	ad := newAdapter(caps(4000))
	for range 20 {
		c := stream.New(ad, dm, stream.Options{})
		c.Start(t.Context())
		c.SetText("some text that is long enough to post at once")
		c.ToolStart("1", "bash", cmd("ls"))
		if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	c := stream.New(ad, dm, stream.Options{})
	c.Start(ctx)
	cancel()
	if _, err := c.Abort(t.Context(), "stopped"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines: %d before, %d after", before, after)
	}
}

func TestFinalMarkdownReplacesLastMessage(t *testing.T) {
	tests := []struct {
		name  string
		feed  func(c *stream.Controller)
		final string
		want  string
	}{
		{"open message", func(c *stream.Controller) { c.SetText("draft") }, "Done.", "Done."},
		{"ended message", func(c *stream.Controller) { c.SetText("Done"); c.EndMessage() }, "Done.", "Done."},
		{"after a tool", func(c *stream.Controller) {
			c.SetText("Let me look.")
			c.EndMessage()
			c.ToolStart("1", "ls", path("."))
			c.ToolEnd("1", false, "")
		}, "Done.", "Let me look.\n\n✓ `ls · . · 0s`\n\nDone."},
		{"empty final keeps the text", func(c *stream.Controller) { c.SetText("kept") }, "", "kept"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ad := newAdapter(caps(4000))
				c := stream.New(ad, dm, stream.Options{})
				c.Start(t.Context())
				tt.feed(c)
				time.Sleep(2 * time.Second)
				if _, err := c.Finish(t.Context(), chat.Out{Markdown: tt.final}); err != nil {
					t.Fatal(err)
				}
				if got := ad.Messages(dm); len(got) != 1 || got[0] != tt.want {
					t.Errorf("messages = %q, want [%q]", got, tt.want)
				}
			})
		})
	}
}

// TestLatestTextShownBetweenEdits: changes between two edits do not wake
// the loop, yet the text of the last change is on screen by the next edit
// even when nothing changes after it (no Finish).
func TestLatestTextShownBetweenEdits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := newAdapter(caps(4000))
		c := stream.New(ad, dm, stream.Options{})
		c.Start(t.Context())
		text := feed(c, words(150), 10*time.Millisecond) // 1.5 s of deltas, 1 s cadence
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		msgs := ad.Messages(dm)
		if len(msgs) != 1 || !strings.Contains(msgs[0], strings.TrimSpace(text)) {
			t.Fatalf("live message %q does not show the latest text %q", msgs, strings.TrimSpace(text))
		}
		if n := len(outbound(ad.Calls())); n > 3 {
			t.Fatalf("%d sends/edits for 1.5 s of text at a 1 s cadence", n)
		}
		if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
			t.Fatal(err)
		}
	})
}

// An adapter with a status line (the web chat) gets it for the whole
// reply: what the model does, a status set after the first output (a
// queued message) at once, and "writing…" once text shows.
func TestStatusLineKeptForTheWholeReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := caps(4000)
		cp.TypingRefresh = time.Second
		cp.StatusLine = true
		ad := newAdapter(cp)
		c := stream.New(ad, dm, stream.Options{})
		c.Start(t.Context())
		time.Sleep(1500 * time.Millisecond)
		if got := ad.Status(dm); got != "thinking…" {
			t.Errorf("status before output = %q", got)
		}
		c.SetText("The answer is forty-two")
		time.Sleep(3 * time.Second)
		if got := ad.Status(dm); got != "writing…" {
			t.Errorf("status while writing = %q", got)
		}
		// A refresh due at this very instant runs before the count, not
		// after it.
		synctest.Wait()
		n := len(chattest.Filter(ad.Calls(), chattest.MethodStatus))
		c.Status("1 queued message(s)")
		synctest.Wait()
		if got := ad.Status(dm); got != "1 queued message(s)" {
			t.Errorf("status after a message was queued = %q", got)
		}
		if m := len(chattest.Filter(ad.Calls(), chattest.MethodStatus)); m != n+1 {
			t.Errorf("the changed status took %d calls, want 1 at once", m-n)
		}
		c.Status("")
		c.ToolStart("1", "bash", cmd("ls"))
		time.Sleep(1500 * time.Millisecond) // at the latest with the next edit
		if got := ad.Status(dm); got != "running bash…" {
			t.Errorf("status during a tool = %q", got)
		}
		c.ToolEnd("1", false, "")
		if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
			t.Fatal(err)
		}
		if got := ad.Status(dm); got != "" {
			t.Errorf("status after Finish = %q, want cleared", got)
		}
	})
}
