package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/internal/secret"
)

func get(t *testing.T, h http.Handler, target string, hdr ...string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080"+target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

func sampleHistory() *chattest.History {
	h := chattest.NewHistory(Platform)
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	h.Add(chat.ConvSummary{Conv: conv("c1", ""), Title: "sky colour", Updated: at, Messages: 2}, chat.Transcript{
		Messages: []chat.HistoryMessage{
			{ID: "u-1", Text: "why is the sky blue?", Time: at},
			{ID: "b1-1", FromBot: true, Text: "| a | b |\n|---|---|\n| 1 | 2 |", Time: at},
			{ID: "u-2", Thread: "t1", Text: "and at sunset?", Time: at},
			{FromBot: true, Thread: "t1", Text: "red", Time: at}, // reply not recorded as delivered
			// A /tree jump put them on another place's branch too.
			{ID: "u-2", Thread: "t2", Moved: true, Origin: "t1", Text: "and at sunset?", Time: at},
			{ID: "u-1", Thread: "t2", Moved: true, Text: "why is the sky blue?", Time: at},
			{ID: "u-3", Thread: "t2", Moved: true, Origin: "a/b", Text: "from a place no id names", Time: at},
			{Thread: "t2", FromBot: true, Note: true, Text: "summary", Time: at},
		},
		Threads:   []chat.HistoryThread{{ID: "t1", Root: "b1-1", Title: "and at sunset?"}, {ID: "bad/id", Title: "x"}},
		Elsewhere: []string{"u-0", "b1-0", "not/an/id"},
	})
	// Something no browser id can name is never listed.
	h.Add(chat.ConvSummary{Conv: chat.ConvRef{Platform: Platform, Channel: "a:b"}, Title: "odd"}, chat.Transcript{})
	return h
}

func TestHistoryEndpoint(t *testing.T) {
	a := newAdapter(t, Config{})
	hist := sampleHistory()
	a.UseHistory(hist)
	code, body := get(t, a.Handler(), "/api/history?conv=c1")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var got historyReply
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range got.Messages {
		line := m.ID + "|" + m.Thread + "|" + m.From + "|" + m.Text
		if m.Origin != nil {
			line += "|from " + *m.Origin
		}
		if m.Note {
			line += "|note"
		}
		lines = append(lines, line)
	}
	want := []string{"u-1||user|why is the sky blue?", "b1-1||bot|| a | b |\n|---|---|\n| 1 | 2 |", "u-2|t1|user|and at sunset?", "h-3|t1|bot|red",
		"u-2|t2|user|and at sunset?|from t1", "u-1|t2|user|why is the sky blue?|from ", "h-6|t2|user|from a place no id names", "h-7|t2|bot|summary|note"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if len(got.Threads) != 1 || got.Threads[0].ID != "t1" || got.Threads[0].Root == nil || got.Threads[0].Root.ID != "b1-1" || got.Threads[0].Title != "and at sunset?" {
		t.Errorf("threads %+v", got.Threads)
	}
	if strings.Join(got.Elsewhere, ",") != "u-0,b1-0" {
		t.Errorf("elsewhere %q", got.Elsewhere)
	}
	if s := hist.Served(); len(s) != 1 || s[0] != conv("c1", "") {
		t.Errorf("transcript asked for %+v", s)
	}

	code, body = get(t, a.Handler(), "/api/conversations")
	if code != 200 || !strings.Contains(body, `"id":"c1","title":"sky colour"`) || strings.Contains(body, "odd") {
		t.Errorf("conversations: %d %s", code, body)
	}

	for _, target := range []string{"/api/history", "/api/history?conv=a/b", "/api/history?conv=" + strings.Repeat("x", 65)} {
		if code, _ := get(t, a.Handler(), target); code != 400 {
			t.Errorf("%s: status %d, want 400", target, code)
		}
	}
	hist.Fail(errors.New("disk on fire at /secret/path"))
	for _, target := range []string{"/api/history?conv=c1", "/api/conversations"} {
		code, body := get(t, a.Handler(), target)
		if code != 500 || strings.Contains(body, "/secret/path") {
			t.Errorf("%s on a failing history: %d %q (want 500 without the details)", target, code, body)
		}
	}
}

func TestHistoryWithoutGateway(t *testing.T) {
	a := newAdapter(t, Config{})
	if code, body := get(t, a.Handler(), "/api/history?conv=c1"); code != 200 || body != "{\"messages\":[],\"threads\":[],\"elsewhere\":[]}\n" {
		t.Errorf("history: %d %q", code, body)
	}
	if code, body := get(t, a.Handler(), "/api/conversations"); code != 200 || body != "{\"conversations\":[]}\n" {
		t.Errorf("conversations: %d %q", code, body)
	}
}

// The history is guarded like the chat: a page on another site, a
// rebinding DNS name or a request without the token reads nothing.
func TestHistoryIsGuarded(t *testing.T) {
	for _, target := range []string{"/api/history?conv=c1", "/api/conversations"} {
		open := newAdapter(t, Config{})
		open.UseHistory(sampleHistory())
		if code, body := get(t, open.Handler(), target, "Host", "evil.example:8080"); code != 421 || strings.Contains(body, "sky") {
			t.Errorf("%s via a rebinding host: %d %q", target, code, body)
		}
		// A cross-site GET is answered as any GET is, but without CORS
		// headers the page on the other site cannot read it.
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080"+target, nil)
		req.Header.Set("Origin", "http://evil.example")
		w := httptest.NewRecorder()
		open.Handler().ServeHTTP(w, req)
		if v := w.Header().Get("Access-Control-Allow-Origin"); v != "" {
			t.Errorf("%s allows cross-origin reads: %q", target, v)
		}

		locked := newAdapter(t, Config{Token: secret.New("s3cret")})
		locked.UseHistory(sampleHistory())
		if code, body := get(t, locked.Handler(), target); code != 401 || strings.Contains(body, "sky") {
			t.Errorf("%s without the token: %d %q", target, code, body)
		}
		if code, body := get(t, locked.Handler(), target, "Authorization", "Bearer wrong"); code != 401 || strings.Contains(body, "sky") {
			t.Errorf("%s with a wrong token: %d %q", target, code, body)
		}
		if code, body := get(t, locked.Handler(), target, "Authorization", "Bearer s3cret"); code != 200 || !strings.Contains(body, "sky") {
			t.Errorf("%s with the token: %d %q", target, code, body)
		}
	}
}

func TestStatusCarriesSince(t *testing.T) {
	a := newAdapter(t, Config{})
	c := conv("c1", "")
	var first time.Time
	for i, s := range []string{"thinking…", "thinking…", "running bash…"} {
		if err := a.SetStatus(t.Context(), c, s); err != nil {
			t.Fatal(err)
		}
		a.store.mu.Lock()
		since := a.store.convs["c1"].lines[""].since
		a.store.mu.Unlock()
		switch i {
		case 0:
			first = since
		case 1:
			if !since.Equal(first) {
				t.Errorf("a refresh of the same status restarted its clock: %v, then %v", first, since)
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	a.store.mu.Lock()
	evs := a.store.convs["c1"].since(0)
	line := a.store.convs["c1"].lines[""]
	a.store.mu.Unlock()
	var n notice
	if err := json.Unmarshal(evs[len(evs)-1].data, &n); err != nil {
		t.Fatal(err)
	}
	if n.Text != "running bash…" || n.Since == nil || !n.Since.Equal(line.since) {
		t.Fatalf("status event %+v, line %+v", n, line)
	}
	if err := a.SetStatus(t.Context(), c, ""); err != nil {
		t.Fatal(err)
	}
	a.store.mu.Lock()
	_, kept := a.store.convs["c1"].lines[""]
	a.store.mu.Unlock()
	if kept {
		t.Error("a cleared status line is kept")
	}
}
