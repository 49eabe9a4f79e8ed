package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

func waitABit() { time.Sleep(time.Millisecond) }

// recorder is a sink that records inbound events and fails when err is set.
type recorder struct {
	mu  sync.Mutex
	ins []chat.Inbound
	err error
}

func (r *recorder) sink(_ context.Context, in chat.Inbound) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.ins = append(r.ins, in)
	return nil
}

func (r *recorder) got() []chat.Inbound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]chat.Inbound(nil), r.ins...)
}

func serve(t *testing.T, a *Adapter) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, srv *httptest.Server, path, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestGuard(t *testing.T) {
	tok := secret.New("s3cret")
	tests := []struct {
		name   string
		token  secret.Secret
		method string
		target string
		hdr    map[string]string
		want   int
	}{
		{"loopback, no token", secret.Secret{}, "GET", "/", nil, 200},
		{"asset", secret.Secret{}, "GET", "/assets/app.js", nil, 200},
		{"rebinding host", secret.Secret{}, "GET", "/", map[string]string{"Host": "evil.example:8080"}, 421},
		{"localhost host", secret.Secret{}, "GET", "/", map[string]string{"Host": "localhost:8080"}, 200},
		{"token missing", tok, "GET", "/", nil, 401},
		{"token missing on asset", tok, "GET", "/assets/app.js", nil, 401},
		{"bearer", tok, "GET", "/", map[string]string{"Authorization": "Bearer s3cret"}, 200},
		{"bad bearer", tok, "GET", "/", map[string]string{"Authorization": "Bearer s3cre"}, 401},
		{"basic is not bearer", tok, "GET", "/", map[string]string{"Authorization": "Basic s3cret"}, 401},
		{"cookie", tok, "GET", "/", map[string]string{"Cookie": tokenCookie + "=s3cret"}, 200},
		{"bad cookie", tok, "GET", "/", map[string]string{"Cookie": tokenCookie + "=x"}, 401},
		{"query sets cookie", tok, "GET", "/?token=s3cret", nil, 303},
		{"bad query", tok, "GET", "/?token=nope", nil, 401},
		{"any host with token", tok, "GET", "/", map[string]string{"Host": "pi.example:8080", "Authorization": "Bearer s3cret"}, 200},
		{"cross-origin post", secret.Secret{}, "POST", "/api/send", map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, 403},
		{"cross-site post without origin", secret.Secret{}, "POST", "/api/send", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"form post", secret.Secret{}, "POST", "/api/send", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 400},
		{"unknown path", secret.Secret{}, "GET", "/healthz", nil, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdapter(t, Config{Token: tt.token})
			h := a.Handler()
			req := httptest.NewRequest(tt.method, "http://127.0.0.1:8080"+tt.target, strings.NewReader("{}"))
			if tt.method == "POST" {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range tt.hdr {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tt.want {
				t.Errorf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if tt.want == 303 {
				c := w.Result().Cookies()
				if len(c) != 1 || c[0].Value != "s3cret" || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
					t.Errorf("cookies %+v", c)
				}
				if loc := w.Header().Get("Location"); loc != "/" {
					t.Errorf("redirect to %q", loc)
				}
			}
			if w.Header().Get("Content-Security-Policy") == "" {
				t.Error("no CSP header")
			}
		})
	}
}

func TestSend(t *testing.T) {
	a := newAdapter(t, Config{})
	rec := &recorder{}
	run(t, a, rec.sink)
	srv := serve(t, a)

	code, body := post(t, srv, "/api/send", `{"conv":"c1","thread":"","id":"m1","text":"hello"}`)
	if code != 200 || !strings.Contains(body, `"u-m1"`) {
		t.Fatalf("send: %d %s", code, body)
	}
	code, _ = post(t, srv, "/api/send", `{"conv":"c1","thread":"t1","id":"m2","text":"/tree now","replyTo":{"id":"u-m1","thread":""}}`)
	if code != 200 {
		t.Fatalf("send in thread: %d", code)
	}
	got := rec.got()
	if len(got) != 2 {
		t.Fatalf("%d inbound events", len(got))
	}
	in := got[0]
	want := chat.ConvRef{Platform: "web", Channel: "c1", DM: true}
	if in.Kind != chat.KindMessage || in.Conv != want || in.Msg.ID != "u-m1" || in.Text != "hello" ||
		in.User.ID != "local" || in.Command != nil || in.DedupKey == "" || in.ReplyTo != nil {
		t.Errorf("inbound %+v", in)
	}
	in = got[1]
	if in.Conv.Thread != "t1" || in.ReplyTo == nil || in.ReplyTo.ID != "u-m1" || in.ReplyTo.Conv.Thread != "" || in.ReplyToBot {
		t.Errorf("thread inbound %+v", in)
	}
	if in.Command == nil || in.Command.Name != "tree" || in.Command.Args != "now" {
		t.Errorf("command %+v", in.Command)
	}

	bad := []string{
		`{"conv":"","id":"m3","text":"x"}`,
		`{"conv":"c1","id":"m3","text":"  "}`,
		`{"conv":"c1","id":"","text":"x"}`,
		`{"conv":"c1","thread":"a/b","id":"m3","text":"x"}`,
		`{"conv":"c1","id":"m3","text":"x","extra":1}`,
		`not json`,
	}
	for _, b := range bad {
		if code, _ := post(t, srv, "/api/send", b); code != 400 {
			t.Errorf("%s: status %d, want 400", b, code)
		}
	}
	if len(rec.got()) != 2 {
		t.Error("bad requests reached the sink")
	}
}

// TestSendQuiet: a page control's command (the Tree and Stop buttons)
// reaches the gateway as a command but is not posted in the conversation;
// a quiet message that is no command is refused.
func TestSendQuiet(t *testing.T) {
	a := newAdapter(t, Config{})
	rec := &recorder{}
	run(t, a, rec.sink)
	srv := serve(t, a)
	code, body := post(t, srv, "/api/send", `{"conv":"c1","thread":"t1","id":"q1","text":"/tree","quiet":true}`)
	if code != 200 || !strings.Contains(body, `"u-q1"`) {
		t.Fatalf("quiet send: %d %s", code, body)
	}
	got := rec.got()
	if len(got) != 1 || got[0].Command == nil || got[0].Command.Name != "tree" || got[0].Conv.Thread != "t1" || got[0].DedupKey == "" {
		t.Fatalf("inbound %+v", got)
	}
	a.store.mu.Lock()
	var logged int
	if l := a.store.convs["c1"]; l != nil {
		logged = len(l.msgs)
	}
	a.store.mu.Unlock()
	if logged != 0 {
		t.Errorf("the quiet command is in the conversation log (%d messages)", logged)
	}
	for _, b := range []string{
		`{"conv":"c1","id":"q2","text":"hello","quiet":true}`,
		`{"conv":"c1","id":"q3","text":"/tree","quiet":true,"replyTo":{"id":"u-1","thread":""}}`,
	} {
		if code, _ := post(t, srv, "/api/send", b); code != 400 {
			t.Errorf("%s: status %d, want 400", b, code)
		}
	}
	if len(rec.got()) != 1 {
		t.Error("a refused quiet message reached the sink")
	}
}

func TestSendSinkError(t *testing.T) {
	a := newAdapter(t, Config{})
	srv := serve(t, a)
	if code, _ := post(t, srv, "/api/send", `{"conv":"c1","id":"m1","text":"hi"}`); code != 503 {
		t.Errorf("before Run: status %d, want 503", code)
	}
	rec := &recorder{err: errors.New("gateway: inbox: write /data/inbox: disk full")}
	run(t, a, rec.sink)
	code, body := post(t, srv, "/api/send", `{"conv":"c1","id":"m1","text":"hi"}`)
	if code != 500 || strings.TrimSpace(body) != refusedOther {
		t.Errorf("status %d %q, want 500 with words, not the error", code, body)
	}
	a.store.mu.Lock()
	msgErr := a.store.convs["c1"].msgs["u-m1"].Error
	a.store.mu.Unlock()
	if msgErr != refusedOther {
		t.Errorf("message error %q", msgErr)
	}
	// A retry with the same id succeeds and clears the error, without a
	// second copy of the message.
	rec.mu.Lock()
	rec.err = nil
	rec.mu.Unlock()
	if code, _ := post(t, srv, "/api/send", `{"conv":"c1","id":"m1","text":"hi"}`); code != 200 {
		t.Errorf("retry: status %d", code)
	}
	a.store.mu.Lock()
	l := a.store.convs["c1"]
	msgErr, n := l.msgs["u-m1"].Error, len(l.msgs)
	a.store.mu.Unlock()
	if msgErr != "" || n != 1 {
		t.Errorf("after retry: error %q, %d messages", msgErr, n)
	}
}

func TestAction(t *testing.T) {
	a := newAdapter(t, Config{})
	rec := &recorder{}
	run(t, a, rec.sink)
	srv := serve(t, a)
	c := conv("c1", "t9")
	r, err := a.Send(t.Context(), c, chat.Out{Markdown: "run bash?", Buttons: [][]chat.Button{{{ID: "ok", Label: "Allow"}, {ID: "no", Label: "Deny"}}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		body string
		want int
	}{
		{`{"conv":"c1","msg":"` + r.ID + `","data":"no","id":"p1"}`, 200},
		{`{"conv":"c1","msg":"` + r.ID + `","data":"maybe","id":"p2"}`, 409},
		{`{"conv":"c1","msg":"gone","data":"no","id":"p3"}`, 404},
		{`{"conv":"c2","msg":"` + r.ID + `","data":"no","id":"p4"}`, 404},
		{`{"conv":"c1","msg":"` + r.ID + `","data":"","id":"p5"}`, 400},
	}
	for _, tt := range tests {
		if code, body := post(t, srv, "/api/action", tt.body); code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.body, code, body, tt.want)
		}
	}
	got := rec.got()
	if len(got) != 1 {
		t.Fatalf("%d inbound events", len(got))
	}
	in := got[0]
	if in.Kind != chat.KindAction || in.Action == nil || in.Action.Data != "no" || in.Action.Msg != r || in.Conv != c {
		t.Errorf("action inbound %+v", in)
	}
}

// sse reads one event stream.
type sse struct {
	r      *bufio.Reader
	cancel context.CancelFunc
}

type sseEvent struct {
	id      string
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Text    string         `json:"text"`
	Thread  string         `json:"thread"`
	From    string         `json:"from"`
	Error   string         `json:"error"`
	Problem string         `json:"problem"`
	Since   *time.Time     `json:"since"`
	Buttons [][]wireButton `json:"buttons"`
}

func openEvents(t *testing.T, srv *httptest.Server, query, lastID string) *sse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %s", resp.Status)
	}
	s := &sse{r: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return s
}

// next returns the next event with data.
func (s *sse) next(t *testing.T) sseEvent {
	t.Helper()
	var ev sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &ev); err != nil {
				t.Fatalf("bad event data %q: %v", line, err)
			}
		case line == "" && ev.Type != "":
			return ev
		}
	}
}

// until reads events up to and including the "ready" marker.
func (s *sse) untilReady(t *testing.T) []sseEvent {
	t.Helper()
	var evs []sseEvent
	for {
		ev := s.next(t)
		if ev.Type == "ready" {
			return evs
		}
		evs = append(evs, ev)
	}
}

func TestEventsReplay(t *testing.T) {
	ctx := t.Context()
	a := newAdapter(t, Config{})
	run(t, a, (&recorder{}).sink)
	srv := serve(t, a)
	c := conv("c1", "")

	r1, _ := a.Send(ctx, c, chat.Out{Markdown: "first"})
	s := openEvents(t, srv, "conv=c1", "")
	if evs := s.untilReady(t); len(evs) != 1 || evs[0].ID != r1.ID || evs[0].Text != "first" {
		t.Fatalf("backlog %+v", evs)
	}
	if err := a.Edit(ctx, r1, chat.Out{Markdown: "first, edited"}); err != nil {
		t.Fatal(err)
	}
	ev := s.next(t)
	if ev.Type != "msg" || ev.ID != r1.ID || ev.Text != "first, edited" {
		t.Fatalf("live edit %+v", ev)
	}
	if err := a.SetStatus(ctx, c, "thinking…"); err != nil {
		t.Fatal(err)
	}
	st := s.next(t)
	if st.Type != "status" || st.Text != "thinking…" {
		t.Fatalf("status %+v", st)
	}
	lastSeen := st.id
	s.cancel()

	// Missed while disconnected.
	r2, _ := a.Send(ctx, c, chat.Out{Markdown: "second"})
	if err := a.SetStatus(ctx, c, ""); err != nil {
		t.Fatal(err)
	}
	s = openEvents(t, srv, "conv=c1", lastSeen)
	evs := s.untilReady(t)
	// The cleared status replaces the one already seen.
	if len(evs) != 2 || evs[0].ID != r2.ID || evs[1].Type != "status" || evs[1].Text != "" {
		t.Fatalf("replay after %s: %+v", lastSeen, evs)
	}
	s.cancel()

	// The "last" query parameter works like the header.
	s = openEvents(t, srv, "conv=c1&last="+evs[0].id, "")
	if evs := s.untilReady(t); len(evs) != 1 || evs[0].Type != "status" {
		t.Fatalf("replay via query: %+v", evs)
	}
	s.cancel()

	// An id from another process resets the client and replays everything.
	s = openEvents(t, srv, "conv=c1", "oldepoch.7")
	if ev := s.next(t); ev.Type != "reset" {
		t.Fatalf("want reset, got %+v", ev)
	}
	if evs := s.untilReady(t); len(evs) != 4 {
		t.Fatalf("full replay: %+v", evs)
	}
}

func TestEventsEndWithRun(t *testing.T) {
	a := newAdapter(t, Config{})
	stop := runStoppable(t, a)
	srv := serve(t, a)
	s := openEvents(t, srv, "conv=c1", "")
	s.untilReady(t)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := s.r.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Errorf("stream still open after Run ended: %v", err)
	}
	req := httptest.NewRequest("GET", "http://127.0.0.1/api/events?conv=c1", nil)
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, req)
	if w.Code != 503 {
		t.Errorf("events without Run: %d, want 503", w.Code)
	}
}

// A refused event is answered with words for its cause, never the
// error's text: the store unavailable (chat.ErrUnavailable), the chat not
// running, anything else.
func TestRefusalWords(t *testing.T) {
	internal := errors.New("rediscluster: admit: dial tcp 10.0.0.7:6379: connect: connection refused")
	tests := []struct {
		name   string
		err    error
		status int
		words  string
	}{
		{"store unavailable", fmt.Errorf("gateway: admit: %w: %w", chat.ErrUnavailable, internal), 503, refusedUnavailable},
		{"other", fmt.Errorf("gateway: encode inbound: %w", internal), 500, refusedOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdapter(t, Config{})
			srv := serve(t, a)
			run(t, a, (&recorder{err: tt.err}).sink)
			for _, c := range []struct{ path, body, words string }{
				{"/api/send", `{"conv":"c1","id":"m1","text":"hi"}`, tt.words},
				{"/api/send", `{"conv":"c1","id":"m2","text":"/stop","quiet":true}`, strings.Replace(tt.words, "this message", "this command", 1)},
			} {
				code, body := post(t, srv, c.path, c.body)
				if code != tt.status || strings.TrimSpace(body) != c.words {
					t.Errorf("%s %s = %d %q, want %d %q", c.path, c.body, code, body, tt.status, c.words)
				}
				if strings.Contains(body, "dial tcp") {
					t.Errorf("internal error text shown: %q", body)
				}
			}
		})
	}
	a := newAdapter(t, Config{})
	srv := serve(t, a)
	if code, body := post(t, srv, "/api/send", `{"conv":"c1","id":"m1","text":"hi"}`); code != 503 || strings.TrimSpace(body) != refusedStopped {
		t.Errorf("not running: %d %q", code, body)
	}
}

// ShowHealth reaches every event stream as a health event, at once for a
// stream open now and first thing for one opened while the problem lasts;
// /api/info tells it too. Clearing it is an event with no problem.
func TestShowHealthEvents(t *testing.T) {
	a := newAdapter(t, Config{})
	srv := serve(t, a)
	run(t, a, (&recorder{}).sink)
	open := openEvents(t, srv, "conv=c1", "")
	if evs := open.untilReady(t); len(evs) != 0 {
		t.Fatalf("a healthy start sends %v", evs)
	}
	a.ShowHealth("storage unavailable, retrying")
	if ev := open.next(t); ev.Type != "health" || ev.Problem != "storage unavailable, retrying" {
		t.Errorf("live: %+v", ev)
	}
	later := openEvents(t, srv, "conv=c2", "")
	if evs := later.untilReady(t); len(evs) != 1 || evs[0].Problem != "storage unavailable, retrying" {
		t.Errorf("a stream opened during the problem starts with %+v", evs)
	}
	resp, err := srv.Client().Get(srv.URL + "/api/info")
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Health string }
	_ = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if info.Health != "storage unavailable, retrying" {
		t.Errorf("/api/info health %q", info.Health)
	}
	a.ShowHealth("")
	for _, s := range []*sse{open, later} {
		if ev := s.next(t); ev.Type != "health" || ev.Problem != "" {
			t.Errorf("cleared: %+v", ev)
		}
	}
}
