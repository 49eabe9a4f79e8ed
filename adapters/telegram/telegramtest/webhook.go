package telegramtest

import (
	"bytes"
	"context"
	"net/http"
	"time"
)

// Delivery is one attempt to deliver an update to the webhook.
type Delivery struct {
	UpdateID int64
	URL      string
	// Code is the HTTP status answered; 0 when the request failed
	// (connection refused or reset, timeout).
	Code int
	Err  string
	Time time.Time
}

// WithWebhookDelivery makes the server deliver queued updates to the
// webhook set with setWebhook, as Telegram does: one at a time, in order,
// POSTed as JSON with the X-Telegram-Bot-Api-Secret-Token header; an
// update is confirmed by a 2xx answer and otherwise sent again after
// retry. Without this option updates wait for getUpdates only.
func WithWebhookDelivery(retry time.Duration) Option {
	return func(s *Server) {
		s.deliverRetry = max(retry, time.Millisecond)
		s.deliver = true
	}
}

// Deliveries returns every webhook delivery attempt so far, in order.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

// MaxConcurrentPolls returns the largest number of getUpdates requests
// the server held at once; above 1, two clients polled at the same time.
func (s *Server) MaxConcurrentPolls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxPolls
}

// pollStarted counts a getUpdates request in; the returned func counts it
// out.
func (s *Server) pollStarted() func() {
	s.mu.Lock()
	s.polls++
	s.maxPolls = max(s.maxPolls, s.polls)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.polls--
		s.mu.Unlock()
	}
}

// deliverLoop delivers updates to the webhook until ctx ends; Close ends
// it and waits for it.
func (s *Server) deliverLoop(ctx context.Context) {
	defer close(s.deliverDone)
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		s.mu.Lock()
		url, secret := s.webhookURL, s.webhookSec
		notify := s.notify
		var raw []byte
		var id int64
		if url != "" && len(s.updates) > 0 {
			raw, id = s.updates[0], s.updateIDs[0]
		}
		s.mu.Unlock()
		if raw == nil {
			select {
			case <-ctx.Done():
				return
			case <-notify:
			}
			continue
		}
		d := Delivery{UpdateID: id, URL: url, Time: time.Now()}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			if secret != "" {
				req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
			}
			var resp *http.Response
			if resp, err = client.Do(req); err == nil {
				d.Code = resp.StatusCode
				resp.Body.Close()
			}
		}
		if err != nil {
			d.Err = err.Error()
		}
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.deliveries = append(s.deliveries, d)
		ok := d.Code/100 == 2
		if ok && len(s.updateIDs) > 0 && s.updateIDs[0] == id {
			s.updateIDs, s.updates = s.updateIDs[1:], s.updates[1:]
		}
		s.mu.Unlock()
		if ok {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.deliverRetry):
		}
	}
}
