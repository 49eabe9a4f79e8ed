// Package transport is pibot's retry policy around the vendor SDKs: an
// attempt that fails transiently (429, 408, 5xx, overloaded, connection
// errors, timeouts) is retried with exponential backoff that honours
// Retry-After, other 4xx never. Failures become *llm.APIError with
// credentials redacted.
package transport

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pibot/pibot/internal/backoff"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
)

// RetryPolicy says how often and how long to retry a failed call before
// the first byte of its stream is read.
type RetryPolicy struct {
	// MaxRetries is the number of retries after the first attempt; 0 means
	// the default 3, negative disables retries.
	MaxRetries int
	// BaseDelay is the first backoff (doubled each retry); 0 means 1s.
	BaseDelay time.Duration
	// MaxDelay caps every wait, including a server's Retry-After; 0 means 60s.
	MaxDelay time.Duration
	// Sleep waits d or until ctx ends; nil means a timer. Tests inject a
	// fake to avoid real waits.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (p RetryPolicy) retries() int {
	switch {
	case p.MaxRetries < 0:
		return 0
	case p.MaxRetries == 0:
		return 3
	}
	return p.MaxRetries
}

// Delay returns the wait before retry number attempt (1-based) given the
// server's Retry-After (0 when absent).
func (p RetryPolicy) Delay(attempt int, retryAfter time.Duration) time.Duration {
	base, maxD := p.BaseDelay, p.MaxDelay
	if base <= 0 {
		base = time.Second
	}
	if maxD <= 0 {
		maxD = time.Minute
	}
	if retryAfter > 0 {
		return min(retryAfter, maxD)
	}
	return backoff.Exp(base, attempt, maxD)
}

func (p RetryPolicy) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	return backoff.Sleep(ctx, d)
}

// Client runs the calls of one provider under its RetryPolicy. The
// vendor SDK sends each attempt (with its own retries switched off); the
// Client decides whether a failed attempt is retried and how long to wait.
type Client struct {
	// Provider names the provider in errors and logs.
	Provider string
	Retry    RetryPolicy
	Logger   *slog.Logger
	// Secrets are redacted from every error text.
	Secrets []secret.Secret
	// BaseURL is where the provider is called, named in the hint of a
	// failure to reach it.
	BaseURL string
	// KeySource says where the API key comes from (an environment
	// variable, a config key), named in the hint of a rejected key.
	KeySource string
}

func (c *Client) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// Do calls attempt until it returns nil or a final failure. An attempt
// reports a failure as *llm.APIError (see Failure); retryable ones are
// retried with backoff, anything else ends the call. A cancelled ctx
// returns ctx.Err() (possibly wrapped).
func (c *Client) Do(ctx context.Context, attempt func(ctx context.Context) error) error {
	for n := 0; ; n++ {
		err := attempt(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var apiErr *llm.APIError
		if !errors.As(err, &apiErr) || !apiErr.Retryable() || n >= c.Retry.retries() {
			return err
		}
		if te, ok := errors.AsType[*TimeoutError](err); ok && !te.Retryable() {
			return err
		}
		d := c.Retry.Delay(n+1, apiErr.RetryAfter)
		c.logger().LogAttrs(ctx, slog.LevelWarn, "model call failed, retrying",
			slog.String("provider", c.Provider), slog.Int("status", apiErr.Status),
			slog.String("err", apiErr.Message), slog.Int("attempt", n+1), slog.Duration("delay", d))
		if err := c.Retry.sleep(ctx, d); err != nil {
			return err
		}
	}
}

// Failure maps a failed SDK call to *llm.APIError: resp is the HTTP
// response the SDK received (nil when none), err the SDK's error. A
// response with an error status is classified by status and body (the
// SDKs leave the body readable); otherwise err is a connection failure.
func (c *Client) Failure(resp *http.Response, err error) *llm.APIError {
	if resp != nil && resp.StatusCode >= 300 {
		return c.statusError(resp)
	}
	if te, ok := errors.AsType[*TimeoutError](err); ok {
		return &llm.APIError{Provider: c.Provider, Message: te.Error(), Err: te}
	}
	if hint := c.unreachable(err); hint != "" {
		return &llm.APIError{Provider: c.Provider, Message: c.redact(hint), Err: errors.New(c.redact(err.Error())), Permanent: true}
	}
	return &llm.APIError{Provider: c.Provider, Message: c.redact(transportText(err)), Err: errors.New(c.redact(err.Error()))}
}

func transportText(err error) string {
	s := err.Error()
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			s = inner.Error()
		}
	}
	if strings.Contains(s, "Client.Timeout") || strings.Contains(s, "deadline exceeded") {
		return "request timed out: " + s
	}
	return "connection error: " + s
}

func (c *Client) redact(s string) string { return secret.Redact(s, c.Secrets...) }

// statusError reads and closes the body of a failed response.
func (c *Client) statusError(resp *http.Response) *llm.APIError {
	var body []byte
	if resp.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}
	msg := ErrorText(body)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
		if len(body) == 0 {
			msg = "status code (no body)"
		}
	}
	e := &llm.APIError{
		Provider:   c.Provider,
		Status:     resp.StatusCode,
		Message:    c.redact(msg),
		RetryAfter: RetryAfter(resp.Header, time.Now()),
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		e.Err = llm.ErrRateLimited
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		e.Err = llm.ErrAuth
		e.Message += c.keyHint()
	case resp.StatusCode == http.StatusNotFound:
		e.Message += c.notFoundHint()
	case llm.IsOverflowText(msg):
		e.Err = llm.ErrContextOverflow
		e.Message += c.overflowHint()
	}
	return e
}

// ErrorText extracts a human message from an error body: the message of
// {"error":{"message"}} (OpenAI, Anthropic) or {"error":"..."} or
// {"message":"..."}, else the trimmed body.
func ErrorText(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		var inner struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &inner) == nil && inner.Message != "":
			if inner.Type != "" && !strings.Contains(inner.Message, inner.Type) {
				return inner.Type + ": " + inner.Message
			}
			return inner.Message
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return s
		case v.Message != "":
			return v.Message
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 2000 {
		s = s[:2000]
	}
	return s
}

// RetryAfter reads retry-after-ms or Retry-After (seconds or HTTP date).
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
