package chattest_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
)

var (
	dm    = chat.ConvRef{Platform: "test", Channel: "1", DM: true}
	group = chat.ConvRef{Platform: "test", Channel: "-5"}
)

func TestMessagesAfterEditsAndDeletes(t *testing.T) {
	ctx := t.Context()
	ad := chattest.New()
	a, err := ad.Send(ctx, dm, chat.Out{Markdown: "one"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ad.Send(ctx, dm, chat.Out{Markdown: "two"})
	if _, err := ad.Send(ctx, group, chat.Out{Markdown: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	if err := ad.Edit(ctx, a, chat.Out{Markdown: "one, edited"}); err != nil {
		t.Fatal(err)
	}
	if err := ad.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := ad.Edit(ctx, b, chat.Out{Markdown: "x"}); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("edit of a deleted message: %v, want ErrNotFound", err)
	}
	if got := ad.Messages(dm); !slices.Equal(got, []string{"one, edited"}) {
		t.Errorf("Messages = %q", got)
	}
	if got := ad.LastText(group); got != "elsewhere" {
		t.Errorf("LastText(group) = %q", got)
	}
	calls := ad.Calls()
	if len(calls) != 6 || calls[5].Err == nil || calls[0].Ref != a {
		t.Errorf("calls = %+v", calls)
	}
}

// Without a call log the fake still keeps its messages: edits find them.
func TestWithoutCallLog(t *testing.T) {
	ctx := t.Context()
	ad := chattest.New(chattest.WithoutCallLog())
	a, err := ad.Send(ctx, dm, chat.Out{Markdown: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ad.Edit(ctx, a, chat.Out{Markdown: "one, edited"}); err != nil {
		t.Fatal(err)
	}
	if err := ad.Edit(ctx, chat.MsgRef{Conv: dm, ID: "nope"}, chat.Out{Markdown: "x"}); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("edit of an unknown message: %v, want ErrNotFound", err)
	}
	if got := ad.Messages(dm); !slices.Equal(got, []string{"one, edited"}) {
		t.Errorf("Messages = %q", got)
	}
	if calls := ad.Calls(); len(calls) != 0 {
		t.Errorf("calls = %+v, want none recorded", calls)
	}
}

func TestCapsPerConversation(t *testing.T) {
	d := chat.Caps{Dialect: chat.DialectTelegram, MaxLen: 4096}
	g := chat.Caps{Dialect: chat.DialectTelegram, MaxLen: 100}
	ad := chattest.New(chattest.WithCaps(d, g), chattest.WithPlatform("telegram"))
	if ad.Caps(dm) != d || ad.Caps(group) != g || ad.Platform() != "telegram" {
		t.Errorf("caps = %+v / %+v", ad.Caps(dm), ad.Caps(group))
	}
}

func TestFailNext(t *testing.T) {
	ctx := t.Context()
	ad := chattest.New()
	ref, _ := ad.Send(ctx, dm, chat.Out{Markdown: "a"})
	ad.FailNext(chattest.MethodEdit, 2, chattest.ErrServer)
	ad.FailNext(chattest.MethodEdit, 1, chat.ErrNotFound)
	want := []error{chattest.ErrServer, chattest.ErrServer, chat.ErrNotFound, nil}
	for i, w := range want {
		if err := ad.Edit(ctx, ref, chat.Out{Markdown: "b"}); !errors.Is(err, w) || (w == nil && err != nil) {
			t.Errorf("edit %d: %v, want %v", i, err, w)
		}
	}
	if got := ad.LastText(dm); got != "b" {
		t.Errorf("text = %q", got)
	}
}

func TestRetryAfterViolations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		ad := chattest.New()
		ad.FailNext(chattest.MethodSend, 1, chattest.RateLimited(3*time.Second))
		if _, err := ad.Send(ctx, dm, chat.Out{Markdown: "a"}); !errors.Is(err, chat.ErrRateLimited) {
			t.Fatalf("send: %v, want rate limited", err)
		}
		time.Sleep(time.Second)
		_, err := ad.Send(ctx, dm, chat.Out{Markdown: "a"})
		rl, ok := errors.AsType[*chat.RateLimitError](err)
		if !ok || rl.RetryAfter != 2*time.Second {
			t.Errorf("early send: %v, want retry after 2s", err)
		}
		if _, err := ad.Send(ctx, group, chat.Out{Markdown: "other chat"}); err != nil {
			t.Errorf("other conversation: %v", err)
		}
		time.Sleep(2 * time.Second)
		if _, err := ad.Send(ctx, dm, chat.Out{Markdown: "a"}); err != nil {
			t.Errorf("send after the pause: %v", err)
		}
		v := ad.Violations()
		if len(v) != 1 || v[0].Call.Method != chattest.MethodSend || v[0].Call.Conv != dm {
			t.Errorf("violations = %+v, want the early send", v)
		}
	})
}

func TestRateModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		ad := chattest.New(chattest.WithRateLimit(chattest.RateLimit{
			Methods: []chattest.Method{chattest.MethodEdit}, Max: 2, Window: 5 * time.Second,
		}))
		ref, _ := ad.Send(ctx, dm, chat.Out{Markdown: "a"})
		for i, text := range []string{"b", "c"} {
			if err := ad.Edit(ctx, ref, chat.Out{Markdown: text}); err != nil {
				t.Fatalf("edit %d: %v", i, err)
			}
			time.Sleep(time.Second)
		}
		err := ad.Edit(ctx, ref, chat.Out{Markdown: "d"})
		rl, ok := errors.AsType[*chat.RateLimitError](err)
		if !ok || rl.RetryAfter != 3*time.Second {
			t.Fatalf("third edit: %v, want retry after 3s", err)
		}
		if _, err := ad.Send(ctx, dm, chat.Out{Markdown: "sends are not limited"}); !errors.Is(err, chat.ErrRateLimited) {
			t.Errorf("send during the announced pause: %v, want rate limited", err)
		}
		time.Sleep(3 * time.Second)
		if err := ad.Edit(ctx, ref, chat.Out{Markdown: "d"}); err != nil {
			t.Errorf("edit after retry-after: %v", err)
		}
		if v := ad.Violations(); len(v) != 1 {
			t.Errorf("violations = %+v, want the early send", v)
		}
	})
}

func TestInjectAndRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := chattest.New()
		got := make(chan chat.Inbound, 1)
		sinkErr := errors.New("not durable")
		errs := make(chan error, 1)
		go func() {
			errs <- ad.Inject(t.Context(), chat.Inbound{Conv: dm, Text: "hi"})
		}()
		synctest.Wait()
		select {
		case err := <-errs:
			t.Fatalf("Inject returned %v before Run", err)
		default:
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			done <- ad.Run(ctx, func(_ context.Context, in chat.Inbound) error {
				got <- in
				return sinkErr
			})
		}()
		if err := <-errs; !errors.Is(err, sinkErr) {
			t.Errorf("Inject = %v, want the sink's error", err)
		}
		if in := <-got; in.Text != "hi" {
			t.Errorf("sink got %+v", in)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

func TestWaitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := chattest.New()
		go func() {
			time.Sleep(time.Second)
			_, _ = ad.Send(context.Background(), dm, chat.Out{Markdown: "late"})
		}()
		err := ad.WaitFor(t.Context(), func(calls []chattest.Call) bool {
			return len(chattest.Filter(calls, chattest.MethodSend)) == 1
		})
		if err != nil || ad.LastText(dm) != "late" {
			t.Errorf("WaitFor = %v, text %q", err, ad.LastText(dm))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := ad.WaitFor(ctx, func([]chattest.Call) bool { return false }); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitFor never true = %v", err)
		}
	})
}

func TestOptionalAbilities(t *testing.T) {
	ctx := t.Context()
	ad := chattest.New()
	ref, _ := ad.Send(ctx, dm, chat.Out{Markdown: "approve?", Buttons: [][]chat.Button{{{ID: "y", Label: "Yes"}}}})
	if err := ad.React(ctx, ref, "👀"); err != nil {
		t.Fatal(err)
	}
	ix := ad.Interaction(ref, "u1")
	if _, err := ad.Answer(ctx, ix, chat.Answer{Toast: "ok", Replace: &chat.Out{Markdown: "approved"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ad.Answer(ctx, ix, chat.Answer{Toast: "again"}); !errors.Is(err, chat.ErrExpired) {
		t.Errorf("second answer: %v, want ErrExpired", err)
	}
	m, _ := ad.Message(ref)
	if m.Text != "approved" || m.Buttons != nil || !slices.Equal(m.Reactions, []string{"👀"}) {
		t.Errorf("message = %+v", m)
	}
	up, err := ad.Upload(ctx, dm, chat.OutFile{Name: "a.txt", Reader: strings.NewReader("data"), Caption: "file"}, &ref)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := ad.Message(up); m.File == nil || string(m.File.Data) != "data" || m.Text != "file" {
		t.Errorf("upload = %+v", m)
	}
	ad.SetFile("f1", []byte("payload"))
	var buf bytes.Buffer
	if err := ad.Download(ctx, chat.FileRef{ID: "f1"}, &buf); err != nil || buf.String() != "payload" {
		t.Errorf("download = %q, %v", buf.String(), err)
	}
	if err := ad.Download(ctx, chat.FileRef{ID: "nope"}, &buf); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("download of a missing file: %v", err)
	}
	cmds := []chat.CommandSpec{{Name: "stop", Description: "stop the run"}}
	if err := ad.RegisterCommands(ctx, cmds); err != nil || !slices.Equal(ad.Commands(), cmds) {
		t.Errorf("commands = %v, %v", ad.Commands(), err)
	}
	if err := ad.SetStatus(ctx, dm, "thinking…"); err != nil || ad.Status(dm) != "thinking…" {
		t.Errorf("status = %q, %v", ad.Status(dm), err)
	}
}

func TestNativeStream(t *testing.T) {
	ctx := t.Context()
	ad := chattest.New()
	var _ chat.Streamer = ad.Streaming()
	st, err := ad.Streaming().OpenStream(ctx, dm, chat.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, "partial"); err != nil || ad.Draft(dm) != "partial" {
		t.Fatalf("draft = %q, %v", ad.Draft(dm), err)
	}
	if len(ad.Messages(dm)) != 0 {
		t.Errorf("a draft posted a message")
	}
	ref, err := st.Finish(ctx, chat.Out{Markdown: "final"})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := ad.Message(ref); m.Text != "final" || ad.Draft(dm) != "" {
		t.Errorf("after finish: %+v, draft %q", m, ad.Draft(dm))
	}
	if err := st.Update(ctx, "more"); err == nil {
		t.Errorf("update after finish succeeded")
	}
}
