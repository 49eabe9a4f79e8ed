package telegramtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"
)

// TestWebhookDelivery: updates go to the webhook in order with the secret
// token; a non-2xx answer or a refused connection is retried until a 2xx
// confirms the update, and every attempt is recorded.
func TestWebhookDelivery(t *testing.T) {
	var mu sync.Mutex
	var got []string
	fail := 2 // the first two attempts get a 500
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("X-Telegram-Bot-Api-Secret-Token") != "sec" {
			t.Errorf("secret token %q", r.Header.Get("X-Telegram-Bot-Api-Secret-Token"))
		}
		if fail > 0 {
			fail--
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var u models.Update
		if err := json.Unmarshal(b, &u); err != nil {
			t.Errorf("body: %v", err)
		}
		got = append(got, u.Message.Text)
	}))
	defer hook.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // connections to it are refused

	s := New(token, WithWebhookDelivery(5*time.Millisecond))
	defer s.Close()
	s.AddText(7, models.User{ID: 7}, "a")
	if a := call(t, s, "setWebhook", url.Values{"url": {deadURL}, "secret_token": {"sec"}}); !a.OK {
		t.Fatalf("setWebhook: %+v", a)
	}
	waitFor(t, func() bool { return len(s.Deliveries()) >= 2 })
	if a := call(t, s, "setWebhook", url.Values{"url": {hook.URL}, "secret_token": {"sec"}}); !a.OK {
		t.Fatalf("setWebhook: %+v", a)
	}
	s.AddText(7, models.User{ID: 7}, "b")
	waitFor(t, func() bool { return s.Pending() == 0 })
	mu.Lock()
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("delivered %q, want [a b]", got)
	}
	mu.Unlock()
	var refused, failed, ok int
	for _, d := range s.Deliveries() {
		switch {
		case d.Code == 0 && d.Err != "" && d.URL == deadURL:
			refused++
		case d.Code == http.StatusInternalServerError:
			failed++
		case d.Code == http.StatusOK:
			ok++
		}
	}
	if refused < 2 || failed != 2 || ok != 2 {
		t.Errorf("attempts: %d refused, %d failed, %d ok; want ≥2, 2, 2: %+v", refused, failed, ok, s.Deliveries())
	}
}

// TestWithoutWebhookDeliveryUpdatesWait: by default a set webhook gets no
// deliveries; updates stay queued.
func TestWithoutWebhookDeliveryUpdatesWait(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("a delivery without WithWebhookDelivery")
	}))
	defer hook.Close()
	s := New(token)
	defer s.Close()
	call(t, s, "setWebhook", url.Values{"url": {hook.URL}})
	s.AddText(7, models.User{ID: 7}, "a")
	time.Sleep(50 * time.Millisecond)
	if s.Pending() != 1 || len(s.Deliveries()) != 0 {
		t.Fatalf("pending %d, deliveries %d", s.Pending(), len(s.Deliveries()))
	}
}

// TestMaxConcurrentPolls: sequential polls count one at a time, an
// overlapping one counts two.
func TestMaxConcurrentPolls(t *testing.T) {
	s := New(token)
	defer s.Close()
	call(t, s, "getUpdates", url.Values{"timeout": {"0"}})
	call(t, s, "getUpdates", url.Values{"timeout": {"0"}})
	if n := s.MaxConcurrentPolls(); n != 1 {
		t.Fatalf("sequential polls: max %d, want 1", n)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		call(t, s, "getUpdates", url.Values{"timeout": {"5"}})
	}()
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.polls == 1
	})
	call(t, s, "getUpdates", url.Values{"timeout": {"0"}})
	<-done
	if n := s.MaxConcurrentPolls(); n != 2 {
		t.Fatalf("overlapping polls: max %d, want 2", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
