package llm

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Sentinel errors providers wrap so callers can branch with errors.Is.
var (
	ErrRateLimited     = errors.New("rate limited")
	ErrAuth            = errors.New("authentication failed")
	ErrContextOverflow = errors.New("context overflow")
	ErrNoCredentials   = errors.New("no credentials")
)

// APIError is a failed HTTP call to a model API. Its text never contains
// credentials.
type APIError struct {
	Provider   string
	Status     int
	Message    string
	RetryAfter time.Duration
	Err        error
	// Permanent marks a failure that repeating cannot fix (nothing
	// listens at the address, the host does not exist), although it has
	// no HTTP status.
	Permanent bool
}

func (e *APIError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s: %d %s", e.Provider, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Provider, e.Message)
}

func (e *APIError) Unwrap() error { return e.Err }

// Retryable reports whether the call may succeed if repeated: 429, 5xx and
// transport failures; never other 4xx.
func (e *APIError) Retryable() bool {
	if e.Permanent {
		return false
	}
	return e.Status == 0 || e.Status == 429 || e.Status == 408 || e.Status >= 500
}

// errorPatterns are the texts the error classifiers look for.
type errorPatterns struct {
	retryable  *regexp.Regexp
	url        *regexp.Regexp
	overflow   []*regexp.Regexp
	exclusions []*regexp.Regexp
}

// patterns compiles the classifiers' patterns on first use, so that a
// process that never classifies an error (every start of pibot) does not
// build them.
var patterns = sync.OnceValue(func() *errorPatterns {
	return &errorPatterns{
		url:       regexp.MustCompile(`(?i)\bhttps?://\S+`),
		retryable: regexp.MustCompile(`(?i)overloaded|provider.?returned.?error|rate.?limit|too many requests|429|500|502|503|504|service.?unavailable|server.?error|internal.?error|network.?error|connection.?error|connection.?refused|connection.?lost|websocket.?closed|websocket.?error|other side closed|fetch failed|upstream.?connect|reset before headers|socket hang up|ended without|http2 request did not get a response|timed? out|timeout|terminated|retry delay`),
		overflow: []*regexp.Regexp{
			regexp.MustCompile(`(?i)prompt is too long`),
			regexp.MustCompile(`(?i)request_too_large`),
			regexp.MustCompile(`(?i)input is too long for requested model`),
			regexp.MustCompile(`(?i)exceeds the context window`),
			regexp.MustCompile(`(?i)input token count.*exceeds the maximum`),
			regexp.MustCompile(`(?i)maximum prompt length is \d+`),
			regexp.MustCompile(`(?i)reduce the length of the messages`),
			regexp.MustCompile(`(?i)maximum context length is \d+ tokens`),
			regexp.MustCompile(`(?i)exceeds the limit of \d+`),
			regexp.MustCompile(`(?i)exceeds the available context size`),
			regexp.MustCompile(`(?i)greater than the context length`),
			regexp.MustCompile(`(?i)context window exceeds limit`),
			regexp.MustCompile(`(?i)exceeded model token limit`),
			regexp.MustCompile(`(?i)too large for model with \d+ maximum context length`),
			regexp.MustCompile(`(?i)model_context_window_exceeded`),
			regexp.MustCompile(`(?i)prompt too long; exceeded (max )?context length`),
			regexp.MustCompile(`(?i)context[_ ]length[_ ]exceeded`),
			regexp.MustCompile(`(?i)too many tokens`),
			regexp.MustCompile(`(?i)token limit exceeded`),
			regexp.MustCompile(`(?i)^4(00|13)\s*(status code)?\s*\(no body\)`),
		},
		exclusions: []*regexp.Regexp{
			regexp.MustCompile(`(?i)^(Throttling error|Service unavailable):`),
			regexp.MustCompile(`(?i)rate limit`),
			regexp.MustCompile(`(?i)too many requests`),
		},
	}
})

// IsOverflowText reports whether an error text says the context overflowed.
func IsOverflowText(s string) bool {
	for _, re := range patterns().exclusions {
		if re.MatchString(s) {
			return false
		}
	}
	for _, re := range patterns().overflow {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// IsContextOverflow reports whether an assistant message shows a context
// overflow, like pi-ai's isContextOverflow: an overflow error text, or a
// silent overflow visible in usage (contextWindow > 0).
func IsContextOverflow(m Message, contextWindow int64) bool {
	if m.StopReason == StopError && m.ErrorMessage != "" && IsOverflowText(m.ErrorMessage) {
		return true
	}
	if contextWindow <= 0 {
		return false
	}
	in := m.Usage.Input + m.Usage.CacheRead
	if m.StopReason == StopStop && in > contextWindow {
		return true
	}
	if m.StopReason == StopLength && m.Usage.Output == 0 && float64(in) >= 0.99*float64(contextWindow) {
		return true
	}
	return false
}

// The error texts of a model call cut because the provider stopped
// sending: the providers' transport writes them, IsStall and IsSilence
// find them (wrapped or not).
const (
	// StallText: the answer began, then nothing came for the idle
	// timeout.
	StallText = "timed out: the provider stopped sending"
	// SilenceText: nothing came after the request for the first-byte
	// timeout.
	SilenceText = "timed out: the provider sent nothing"
)

// IsStall reports whether an assistant message failed because the
// provider stopped sending in the middle of the answer. It is retryable,
// but each attempt may cost the whole timeout again, so the agent retries
// it less (agent.StallRetries).
func IsStall(m Message) bool {
	return m.StopReason == StopError && strings.Contains(m.ErrorMessage, StallText)
}

// IsSilence reports whether an assistant message failed because the
// provider sent nothing at all within the first-byte timeout (the agent
// does not retry it: the wait was the longest timeout already).
func IsSilence(m Message) bool {
	return m.StopReason == StopError && strings.Contains(m.ErrorMessage, SilenceText)
}

// RetryableErr reports whether err, the failure behind a model call made
// in this process, may succeed if the call is repeated. ok is false when
// err carries no such decision (no *APIError in its chain): then only the
// message's text can decide (IsRetryable). A context overflow is never
// retryable (compaction handles it).
func RetryableErr(err error) (retry, ok bool) {
	if err == nil {
		return false, false
	}
	if errors.Is(err, ErrContextOverflow) {
		return false, true
	}
	if apiErr, found := errors.AsType[*APIError](err); found {
		return apiErr.Retryable(), true
	}
	return false, false
}

// ShouldRetry reports whether pi's automatic retry repeats a call that
// ended in m: the typed error the call failed with in this process (err,
// nil when there is none) decides first, whatever its text says; without
// one, pi's message pattern decides (IsRetryable), as it does for a
// message read back from a session file. A context overflow, seen in the
// message or the error, is never retried.
func ShouldRetry(m Message, err error, contextWindow int64) bool {
	if m.StopReason != StopError {
		return false
	}
	if retry, ok := RetryableErr(err); ok {
		return retry && !IsContextOverflow(m, contextWindow)
	}
	return IsRetryable(m, contextWindow)
}

// IsRetryable reports whether an assistant message failed with an error pi
// retries automatically (and that is not a context overflow), judging by
// its text alone with pi's pattern: the way to classify a message that
// has no Go error behind it (a session file's, another model's).
func IsRetryable(m Message, contextWindow int64) bool {
	if m.StopReason != StopError || m.ErrorMessage == "" {
		return false
	}
	if IsContextOverflow(m, contextWindow) {
		return false
	}
	// pi's pattern has bare status codes, so the digits of a URL in the
	// message (a port such as :5030, which pibot's hints name) would
	// make any error retryable: URLs are left out of the match.
	p := patterns()
	return p.retryable.MatchString(p.url.ReplaceAllString(m.ErrorMessage, ""))
}
