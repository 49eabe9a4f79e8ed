package discord

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pibot/pibot/adapters/discord/discordtest"
	"github.com/pibot/pibot/chat"
)

// A 429 on an edit (body or header only, route or global) is a
// *chat.RateLimitError, and no call reaches that route inside the window.
func TestEdit429(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault discordtest.Fault
		scope string
	}{
		{"route", discordtest.Fault{Kind: discordtest.Fault429, RetryAfter: 1500 * time.Millisecond}, "chat"},
		{"global", discordtest.Fault{Kind: discordtest.Fault429, RetryAfter: 1500 * time.Millisecond, Global: true}, "global"},
		{"header only", discordtest.Fault{Kind: discordtest.Fault429Header, RetryAfter: 2 * time.Second}, "chat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			ref, err := h.a.Send(ctxT(t), guildConv(), chat.Out{Markdown: "v1"})
			if err != nil {
				t.Fatal(err)
			}
			h.srv.Fail("PATCH message", 1, tc.fault)
			err = h.a.Edit(ctxT(t), ref, chat.Out{Markdown: "v2"})
			rl, ok := errors.AsType[*chat.RateLimitError](err)
			if !ok || rl.RetryAfter < time.Second || rl.Scope != tc.scope {
				t.Fatalf("edit: %v, want a RateLimitError of scope %s", err, tc.scope)
			}
			before := len(h.srv.Calls())
			if err := h.a.Edit(ctxT(t), ref, chat.Out{Markdown: "v3"}); !errors.Is(err, chat.ErrRateLimited) {
				t.Fatalf("edit inside the window: %v", err)
			}
			if n := len(h.srv.Calls()) - before; n != 0 {
				t.Errorf("%d calls inside the 429 window", n)
			}
			if v := h.srv.Violations(); len(v) > 0 {
				t.Errorf("violations: %v", v)
			}
			// A send waits the window out and then goes through.
			if _, err := h.a.Send(ctxT(t), guildConv(), chat.Out{Markdown: "after the window"}); err != nil {
				t.Fatalf("send after the 429: %v", err)
			}
			if v := h.srv.Violations(); len(v) > 0 {
				t.Errorf("violations: %v", v)
			}
		})
	}
}

// Edits of one message are at least a second apart.
func TestEditSpacing(t *testing.T) {
	h := newHarness(t, nil)
	ref, err := h.a.Send(ctxT(t), guildConv(), chat.Out{Markdown: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.a.Edit(ctxT(t), ref, chat.Out{Markdown: "v2"}); err != nil {
		t.Fatal(err)
	}
	err = h.a.Edit(ctxT(t), ref, chat.Out{Markdown: "v3"})
	if rl, ok := errors.AsType[*chat.RateLimitError](err); !ok || rl.Scope != "message" {
		t.Fatalf("a second edit at once: %v", err)
	}
	time.Sleep(editInterval)
	if err := h.a.Edit(ctxT(t), ref, chat.Out{Markdown: "v3"}); err != nil {
		t.Fatal(err)
	}
	m, _ := h.srv.Message(ref.ID)
	for i := 1; i < len(m.Edits); i++ {
		if gap := m.Edits[i].Sub(m.Edits[i-1]); gap < editInterval {
			t.Errorf("edits %d and %d are %s apart", i-1, i, gap)
		}
	}
}

// A 5xx on a send is retried a bounded number of times.
func TestSend5xxRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Fail("POST messages", 2, discordtest.Fault{Kind: discordtest.Fault5xx})
	if _, err := h.a.Send(ctxT(t), guildConv(), chat.Out{Markdown: "through"}); err != nil {
		t.Fatalf("send after two 502s: %v", err)
	}
	h.srv.Fail("POST messages", 10, discordtest.Fault{Kind: discordtest.Fault5xx})
	before := len(h.srv.Calls())
	if _, err := h.a.Send(ctxT(t), guildConv(), chat.Out{Markdown: "never"}); err == nil {
		t.Fatal("send through ten 502s succeeded")
	}
	if n := len(h.srv.Calls()) - before; n != maxAttempts {
		t.Errorf("%d attempts, want %d", n, maxAttempts)
	}
}

// A 5,000-character answer with code arrives in messages of at most 2,000
// code points, each with balanced fences, nothing lost; no mention pings;
// embeds are suppressed.
func TestLongAnswerSplit(t *testing.T) {
	h := newHarness(t, nil)
	var b strings.Builder
	b.WriteString("Here is the code — ünïcödé first:\n\n```go\n")
	for i := 0; b.Len() < 3000; i++ {
		b.WriteString("fmt.Println(\"line ")
		b.WriteString(strings.Repeat("é", 5))
		b.WriteString("\") // @everyone\n")
	}
	b.WriteString("```\n\n")
	for utf8.RuneCountInString(b.String()) < 5000 {
		b.WriteString("A closing paragraph with words. ")
	}
	md := b.String()
	if _, err := h.a.Send(ctxT(t), guildConv(), chat.Out{Markdown: md}); err != nil {
		t.Fatal(err)
	}
	msgs := h.srv.Messages(chanID)
	if len(msgs) < 3 {
		t.Fatalf("%d messages", len(msgs))
	}
	var all strings.Builder
	for i, m := range msgs {
		if n := utf8.RuneCountInString(m.Content); n > 2000 {
			t.Errorf("message %d: %d code points", i, n)
		}
		if strings.Count(m.Content, "```")%2 != 0 {
			t.Errorf("message %d has unbalanced fences:\n%s", i, m.Content)
		}
		if m.Flags&4 == 0 {
			t.Errorf("message %d: embeds not suppressed (flags %d)", i, m.Flags)
		}
		if !strings.Contains(string(m.AllowedMentions), `"parse":[]`) {
			t.Errorf("message %d: allowed_mentions %s", i, m.AllowedMentions)
		}
		all.WriteString(m.Content)
	}
	if got, want := strings.Count(all.String(), "A closing paragraph"), strings.Count(md, "A closing paragraph"); got != want {
		t.Errorf("%d closing sentences of %d arrived", got, want)
	}
}

func TestRegisterCommandsPerGuild(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Guilds = []string{guildID} })
	err := h.a.RegisterCommands(ctxT(t), []chat.CommandSpec{{Name: "stop", Description: "Stop the run"},
		{Name: "status", Description: "Show the status"}, {Name: "new", Description: "Start anew"}})
	if err != nil {
		t.Fatal(err)
	}
	if h.srv.Commands("global") != nil {
		t.Error("registered globally with guilds configured")
	}
	var cmds []struct {
		Name    string `json:"name"`
		Options []struct {
			Name string `json:"name"`
			Type int    `json:"type"`
		} `json:"options"`
	}
	if err := json.Unmarshal(h.srv.Commands(guildID), &cmds); err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 1 || cmds[0].Name != "pi" {
		t.Fatalf("commands %+v", cmds)
	}
	var subs []string
	for _, o := range cmds[0].Options {
		if o.Type != 1 {
			t.Errorf("option %s has type %d, want a subcommand (1)", o.Name, o.Type)
		}
		subs = append(subs, o.Name)
	}
	if strings.Join(subs, ",") != "stop,status,new" {
		t.Errorf("subcommands %v", subs)
	}
}

func TestOpenThreadNameAndArchive(t *testing.T) {
	h := newHarness(t, nil)
	m := h.srv.PostUser(chanID, alice, "x", "")
	name := strings.Repeat("a very long **title** ", 20) + "\n\nsecond line"
	conv, err := h.a.OpenThread(ctxT(t), chat.MsgRef{Conv: guildConv(), ID: m.ID}, name)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := h.srv.Channel(conv.Thread)
	if !ok || c.ParentID != chanID || c.AutoArchive != 1440 {
		t.Fatalf("thread %+v", c)
	}
	if n := utf8.RuneCountInString(c.Name); n < 1 || n > 100 || strings.Contains(c.Name, "\n") || strings.Contains(c.Name, "**") {
		t.Errorf("thread name %q", c.Name)
	}
	if _, err := h.a.OpenThread(ctxT(t), chat.MsgRef{Conv: dmConv(), ID: m.ID}, "x"); err == nil {
		t.Error("a thread in a DM")
	}
}

func TestUploadDownload(t *testing.T) {
	h := newHarness(t, nil)
	data := []byte("file content\n")
	ref, err := h.a.Upload(ctxT(t), guildConv(), chat.OutFile{Name: "notes.txt", MimeType: "text/plain", Reader: bytes.NewReader(data),
		Size: int64(len(data)), Caption: "your notes"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := h.srv.Message(ref.ID)
	if !bytes.Equal(m.Files["notes.txt"], data) || m.Content != "your notes" {
		t.Fatalf("uploaded %+v", m)
	}
	at := h.srv.AddFile("in.txt", "text/plain", []byte("inbound"))
	var buf bytes.Buffer
	if err := h.a.Download(ctxT(t), chat.FileRef{ID: at.URL, Name: at.Filename, Size: int64(at.Size)}, &buf); err != nil || buf.String() != "inbound" {
		t.Fatalf("download: %v %q", err, buf.String())
	}
	// Above the cap: refused before any transfer.
	small := h.adapter(t, func(c *Config) { c.MaxDownload = 3 })
	if err := small.Download(ctxT(t), chat.FileRef{ID: at.URL, Name: "in.txt", Size: 7}, &buf); err == nil || !strings.Contains(err.Error(), "up to 3 bytes") {
		t.Errorf("oversized download: %v", err)
	}
	// A size that lies is caught while reading.
	if err := small.Download(ctxT(t), chat.FileRef{ID: at.URL, Name: "in.txt", Size: 1}, &buf); err == nil {
		t.Error("a file larger than its stated size was taken")
	}
	// Only Discord's CDN (here: the fake's host) is fetched.
	if err := h.a.Download(ctxT(t), chat.FileRef{ID: "https://attacker.example/x", Name: "x"}, &buf); err == nil {
		t.Error("download from another host")
	}
	if v := h.srv.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

func TestInviteURL(t *testing.T) {
	u, err := url.Parse(InviteURL("123456789012345678"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Host != "discord.com" || q.Get("client_id") != "123456789012345678" || q.Get("scope") != "bot applications.commands" {
		t.Errorf("invite URL %s", u)
	}
	// View, send, send in threads, create public threads, attach files,
	// read history, add reactions: nothing more (no administrator).
	if q.Get("permissions") != "309237746752" {
		t.Errorf("permissions %s", q.Get("permissions"))
	}
}

// The token never appears in errors or logs, even at debug level.
func TestTokenNeverInOutput(t *testing.T) {
	h := newHarness(t, nil)
	got := h.run(t)
	h.srv.Fail("PATCH message", 1, discordtest.Fault{Kind: discordtest.Fault429})
	ref, err := h.a.Send(ctxT(t), guildConv(), chat.Out{Markdown: "x"})
	if err != nil {
		t.Fatal(err)
	}
	err = h.a.Edit(ctxT(t), ref, chat.Out{Markdown: "y"})
	h.srv.Command(chanID, alice, "pi", discordtest.Option{Name: "stop", Type: 1})
	in := next(t, got)
	ix := *in.Interaction
	ix.Deadline = time.Now().Add(-time.Second)
	_, lateErr := h.a.Answer(ctxT(t), ix, chat.Answer{Reply: &chat.Out{Markdown: "late"}})
	_ = lateErr
	for _, s := range []string{h.logs.String(), errString(err)} {
		if strings.Contains(s, testToken) {
			t.Fatalf("the token leaked: %s", s)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A bucket whose X-RateLimit-Remaining reaches 0 is waited out by sends
// and refused at once for edits: Discord never answers 429.
func TestHeaderBudget(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Limits.Messages, h.srv.Limits.MessagesWindow = 3, 1500*time.Millisecond
	var last chat.MsgRef
	for i := range 4 {
		ref, err := h.a.Send(ctxT(t), guildConv(), chat.Out{Markdown: "message " + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		last = ref
	}
	for range 2 {
		if _, err := h.a.Send(ctxT(t), guildConv(), chat.Out{Markdown: "more"}); err != nil {
			t.Fatal(err)
		}
	}
	err := h.a.Edit(ctxT(t), last, chat.Out{Markdown: "edited"})
	if err != nil && !errors.Is(err, chat.ErrRateLimited) {
		t.Fatalf("edit: %v", err)
	}
	for _, c := range h.srv.Calls() {
		if c.Status == 429 {
			t.Errorf("Discord answered 429 to %s %s", c.Method, c.Route)
		}
	}
	if v := h.srv.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

// Regression (TestHeaderBudget flaked once): Discord gives
// X-RateLimit-Reset-After with three decimals, possibly rounded down, so a
// bucket closed by a spent answer stays closed past the reset as written,
// never a moment less.
func TestSpentBucketOutlastsRoundedReset(t *testing.T) {
	for _, after := range []string{"1.500", "0.001", "0.0004"} {
		l := newLimiter()
		h := http.Header{}
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset-After", after)
		l.observe("POST /channels/1/messages", h)
		f, _ := strconv.ParseFloat(after, 64)
		if w, min := l.wait("POST /channels/1/messages"), time.Duration(f*float64(time.Second)); w <= min {
			t.Errorf("reset-after %s: route closed for %v, want more than %v", after, w, min)
		}
	}
}
