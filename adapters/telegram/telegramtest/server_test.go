package telegramtest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"
)

const token = "42:test-token"

type answer struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

func call(t *testing.T, s *Server, method string, form url.Values) answer {
	t.Helper()
	resp, err := http.PostForm(s.URL+"/bot"+token+"/"+method, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestGetUpdatesOffsets(t *testing.T) {
	s := New(token)
	defer s.Close()
	s.AddText(7, models.User{ID: 7}, "a")
	s.AddText(7, models.User{ID: 7}, "b")
	var ups []models.Update
	a := call(t, s, "getUpdates", url.Values{"timeout": {"0"}})
	_ = json.Unmarshal(a.Result, &ups)
	if len(ups) != 2 {
		t.Fatalf("got %d updates", len(ups))
	}
	// Asking from the second confirms the first only.
	call(t, s, "getUpdates", url.Values{"offset": {itoa(ups[1].ID)}, "timeout": {"0"}})
	if s.Pending() != 1 {
		t.Fatalf("pending = %d, want 1", s.Pending())
	}
	// A held poll is answered when an update arrives.
	go func() {
		time.Sleep(100 * time.Millisecond)
		s.AddText(7, models.User{ID: 7}, "c")
	}()
	a = call(t, s, "getUpdates", url.Values{"offset": {itoa(ups[1].ID + 1)}, "timeout": {"5"}})
	ups = nil
	_ = json.Unmarshal(a.Result, &ups)
	if len(ups) != 1 || ups[0].Message.Text != "c" {
		t.Fatalf("held poll got %+v", ups)
	}
}

func TestOverlappingPollsConflict(t *testing.T) {
	s := New(token)
	defer s.Close()
	var wg sync.WaitGroup
	var first answer
	wg.Add(1)
	go func() {
		defer wg.Done()
		first = call(t, s, "getUpdates", url.Values{"timeout": {"5"}})
	}()
	time.Sleep(100 * time.Millisecond)
	second := make(chan answer, 1)
	go func() { second <- call(t, s, "getUpdates", url.Values{"timeout": {"1"}}) }()
	wg.Wait()
	if first.ErrorCode != 409 || !strings.Contains(first.Description, "terminated by other getUpdates") {
		t.Fatalf("first poll = %+v, want 409", first)
	}
	if a := <-second; !a.OK {
		t.Fatalf("second poll = %+v", a)
	}
}

func TestRateModelAndViolations(t *testing.T) {
	s := New(token, WithLimits(Limits{PrivatePerSec: 1, PrivateBurst: 1}))
	defer s.Close()
	send := url.Values{"chat_id": {"5"}, "text": {"hi"}}
	if a := call(t, s, "sendMessage", send); !a.OK {
		t.Fatalf("first send: %+v", a)
	}
	a := call(t, s, "sendMessage", send)
	if a.ErrorCode != 429 || a.Parameters.RetryAfter < 1 || !strings.Contains(a.Description, "retry after") {
		t.Fatalf("second send: %+v, want 429", a)
	}
	if v := s.Violations(); len(v) != 0 {
		t.Fatalf("violations = %v", v)
	}
	// A call arriving right after the 429 may have been on the wire already.
	if a := call(t, s, "sendMessage", send); a.ErrorCode != 429 {
		t.Fatalf("send in flight: %+v", a)
	}
	if v := s.Violations(); len(v) != 0 {
		t.Fatalf("in-flight call counted as a violation: %v", v)
	}
	time.Sleep(inFlight + 10*time.Millisecond)
	if a := call(t, s, "sendMessage", send); a.ErrorCode != 429 {
		t.Fatalf("send during retry_after: %+v", a)
	}
	if v := s.Violations(); len(v) != 1 {
		t.Fatalf("violations = %v, want 1", v)
	}
}

func TestEditsAndHTML(t *testing.T) {
	s := New(token, WithLimits(Limits{}))
	defer s.Close()
	tests := []struct {
		text, mode string
		ok         bool
	}{
		{"<b>bold</b> &amp; <i>it</i>", "HTML", true},
		{"<b>unclosed", "HTML", false},
		{"<b><i>crossed</b></i>", "HTML", false},
		{"<h1>nope</h1>", "HTML", false},
		{"a & b", "HTML", false},
		{"<b>raw</b>", "", true},
	}
	for _, tt := range tests {
		a := call(t, s, "sendMessage", url.Values{"chat_id": {"-9"}, "text": {tt.text}, "parse_mode": {tt.mode}})
		if a.OK != tt.ok || (!tt.ok && !strings.Contains(a.Description, "can't parse entities")) {
			t.Errorf("%q: %+v", tt.text, a)
		}
	}
	edit := url.Values{"chat_id": {"-9"}, "message_id": {"1"}, "text": {"<b>new</b>"}, "parse_mode": {"HTML"}}
	if a := call(t, s, "editMessageText", edit); !a.OK {
		t.Fatalf("edit: %+v", a)
	}
	if a := call(t, s, "editMessageText", edit); a.ErrorCode != 400 || !strings.Contains(a.Description, "message is not modified") {
		t.Fatalf("identical edit: %+v", a)
	}
	if m := s.Messages(-9); m[0].Text != "new" || m[0].Edits != 1 {
		t.Fatalf("visible = %+v", m[0])
	}
}

func TestFaults(t *testing.T) {
	s := New(token)
	defer s.Close()
	s.Fail("getMe", 1, Fault{Kind: Fault5xx})
	s.Fail("getMe", 1, Fault{Kind: FaultClose})
	resp, err := http.PostForm(s.URL+"/bot"+token+"/getMe", nil)
	if err != nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("5xx fault: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := http.PostForm(s.URL+"/bot"+token+"/getMe", nil); err == nil {
		t.Fatal("closed connection answered")
	}
	if a := call(t, s, "getMe", nil); !a.OK {
		t.Fatalf("after faults: %+v", a)
	}
	if a := call(t, s, "getMe", nil); !a.OK || len(s.Calls("getMe")) != 4 {
		t.Fatalf("calls = %d", len(s.Calls("getMe")))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
