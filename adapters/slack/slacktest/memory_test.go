package slacktest

import (
	"net/url"
	"testing"
	"testing/synctest"
	"time"
)

// InMemory serves the fake inside a synctest bubble: a call is answered
// and recorded at the bubble's time.
func TestInMemory(t *testing.T) {
	s := New()
	defer s.Close()
	synctest.Test(t, func(t *testing.T) {
		client, stop := s.InMemory()
		defer stop()
		start := time.Now()
		time.Sleep(time.Hour)
		resp, err := client.PostForm(s.APIURL+"auth.test", url.Values{"token": {s.BotToken}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		calls := s.Calls()
		if len(calls) != 1 || calls[0].Method != "auth.test" || calls[0].Error != "" {
			t.Fatalf("calls = %+v, want one auth.test that succeeded", calls)
		}
		if got := calls[0].Time.Sub(start); got != time.Hour {
			t.Errorf("recorded %v after the start, want the bubble's hour", got)
		}
	})
}
