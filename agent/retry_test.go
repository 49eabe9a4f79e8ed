package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

// fakeSleep records delays instead of sleeping.
type fakeSleep struct {
	delays []time.Duration
	fail   error
}

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.delays = append(f.delays, d)
	if f.fail != nil {
		return f.fail
	}
	return ctx.Err()
}

func retryAgent(m llm.Model, s *fakeSleep) *agent.Agent {
	return newAgent(m, nil, func(c *agent.Config) {
		c.Retry = agent.DefaultRetry()
		c.Retry.Sleep = s.sleep
	})
}

func TestRetryThenSuccess(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Fail("529 overloaded_error"), agenttest.Reply(agenttest.Text("ok")))
	s := &fakeSleep{}
	a := retryAgent(m, s)
	r := &recorder{}
	prompt(t, a, r, "hi")
	checkLines(t, r.lines(), seq(promptHead, expand(
		"message_start assistant", "message_end assistant", "turn_end", "agent_end",
		"auto_retry_start 1",
		"agent_start", "turn_start", "message_start assistant", "text 0", "message_end assistant",
		"auto_retry_end 1", "turn_end", "agent_end")))
	if len(s.delays) != 1 || s.delays[0] != 2*time.Second {
		t.Errorf("delays = %v", s.delays)
	}
	msgs := a.Messages()
	if len(msgs) != 2 || msgs[1].Text() != "ok" {
		t.Errorf("error message not removed from state: %+v", msgs)
	}
	var start, end agent.Event
	for _, e := range r.events {
		switch e.Type {
		case agent.EventAutoRetryStart:
			start = e
		case agent.EventAutoRetryEnd:
			end = e
		}
	}
	if start.MaxAttempts != 3 || start.DelayMs != 2000 || start.ErrorMessage != "529 overloaded_error" || !end.Success {
		t.Errorf("retry events = %+v / %+v", start, end)
	}
}

func TestRetryExhausted(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Fail("503 service unavailable"), agenttest.Fail("503 service unavailable"),
		agenttest.Fail("503 service unavailable"), agenttest.Fail("503 service unavailable"))
	s := &fakeSleep{}
	a := retryAgent(m, s)
	r := &recorder{}
	prompt(t, a, r, "hi")
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}
	if len(s.delays) != 3 || s.delays[0] != want[0] || s.delays[1] != want[1] || s.delays[2] != want[2] {
		t.Errorf("delays = %v, want %v", s.delays, want)
	}
	last := r.events[len(r.events)-1]
	if last.Type != agent.EventAutoRetryEnd || last.Success || last.Attempt != 3 || last.FinalError != "503 service unavailable" {
		t.Errorf("last event = %+v", last)
	}
	msgs := a.Messages()
	if len(msgs) != 2 || msgs[1].StopReason != llm.StopError {
		t.Errorf("final error should stay in state: %+v", msgs)
	}
}

func TestRetryNotForOtherErrors(t *testing.T) {
	tests := []string{"400 invalid request", "prompt is too long: 300000 tokens > 200000 maximum"}
	for _, msg := range tests {
		m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Fail(msg))
		s := &fakeSleep{}
		a := retryAgent(m, s)
		prompt(t, a, &recorder{}, "hi")
		if len(s.delays) != 0 {
			t.Errorf("%q retried", msg)
		}
	}
}

func TestRetryCancelled(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Fail("rate limit exceeded"))
	s := &fakeSleep{fail: errors.New("cancelled")}
	a := retryAgent(m, s)
	r := &recorder{}
	prompt(t, a, r, "hi")
	last := r.events[len(r.events)-1]
	if last.Type != agent.EventAutoRetryEnd || last.Success || last.FinalError != "Retry cancelled" || last.Attempt != 1 {
		t.Errorf("last = %+v", last)
	}
}

func TestRetryAbortDuringSleep(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Fail("502 bad gateway"))
	a := newAgent(m, nil, func(c *agent.Config) {
		c.Retry = agent.DefaultRetry()
		c.Retry.BaseDelay = time.Hour
	})
	r := &recorder{hook: func(e agent.Event) {
		if e.Type == agent.EventAutoRetryStart {
			a.Abort()
		}
	}}
	prompt(t, a, r, "hi")
	if last := r.events[len(r.events)-1]; last.FinalError != "Retry cancelled" {
		t.Errorf("last = %+v", last)
	}
}

// TestStallRetriedOnce: a call the provider stopped answering in the
// middle is retried once, whatever MaxRetries says, and one that got
// nothing at all within the first-byte timeout is not retried: a hung
// provider would hold the run for every attempt's full timeout.
func TestStallRetriedOnce(t *testing.T) {
	stall := "openai: read stream: " + llm.StallText + " for 2m0s in the middle of the answer (providers.x.timeouts.idle)"
	silence := "openai: " + llm.SilenceText + " for 10m0s after the request (providers.x.timeouts.first_byte)"
	for _, tc := range []struct {
		name    string
		err     string
		retries int
	}{
		{"stall", stall, 1},
		{"silence", silence, 0},
		{"other retryable", "503 service unavailable", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Fail(tc.err), agenttest.Fail(tc.err), agenttest.Fail(tc.err), agenttest.Fail(tc.err))
			s := &fakeSleep{}
			a := retryAgent(m, s)
			r := &recorder{}
			prompt(t, a, r, "hi")
			if len(s.delays) != tc.retries || len(m.Requests()) != tc.retries+1 {
				t.Errorf("retries = %d (%d calls), want %d", len(s.delays), len(m.Requests()), tc.retries)
			}
			last := r.events[len(r.events)-1]
			if last.Type != agent.EventAutoRetryEnd || last.Success || last.Attempt != tc.retries || last.FinalError != tc.err {
				t.Errorf("last event = %+v, want a failed auto_retry_end after %d retries", last, tc.retries)
			}
			for _, e := range r.events {
				if e.Type == agent.EventAutoRetryStart && e.MaxAttempts != tc.retries {
					t.Errorf("auto_retry_start announces %d attempts, want %d", e.MaxAttempts, tc.retries)
				}
			}
		})
	}
}

// TestRetryDecidedByTypedError: a call that failed in this process with a
// typed error is retried or not on that error, whatever its text says;
// one without (a model that reports text only) follows pi's pattern.
func TestRetryDecidedByTypedError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		msg     string
		err     error
		retried bool
	}{
		{"retryable status, text the pattern misses", "p: odd failure", &llm.APIError{Provider: "p", Status: 503, Message: "odd failure"}, true},
		{"transport failure, text the pattern misses", "p: dial failed", &llm.APIError{Provider: "p", Message: "dial failed"}, true},
		{"final status, text the pattern matches", "p: 400 upstream timeout (503)", &llm.APIError{Provider: "p", Status: 400, Message: "upstream timeout (503)"}, false},
		{"permanent, text the pattern matches", "p: connection refused", &llm.APIError{Provider: "p", Message: "connection refused", Permanent: true}, false},
		{"no typed error, retryable text", "529 overloaded_error", nil, true},
		{"no typed error, other text", "invalid request", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fail := agenttest.Fail(tc.msg)
			fail.Err = tc.err
			m := agenttest.NewScript(llm.ModelInfo{}, fail, agenttest.Reply(agenttest.Text("ok")))
			s := &fakeSleep{}
			a := retryAgent(m, s)
			r := &recorder{}
			prompt(t, a, r, "hi")
			starts := 0
			for _, e := range r.events {
				if e.Type == agent.EventAutoRetryStart {
					starts++
				}
			}
			if got := starts > 0; got != tc.retried {
				t.Fatalf("retried = %v (%d auto_retry_start), want %v", got, starts, tc.retried)
			}
			msgs := a.Messages()
			last := msgs[len(msgs)-1]
			if tc.retried && last.Text() != "ok" || !tc.retried && last.ErrorMessage != tc.msg {
				t.Errorf("last message %q (error %q)", last.Text(), last.ErrorMessage)
			}
		})
	}
}
