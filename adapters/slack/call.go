package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/backoff"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// kind is how a Web API call meets the pace, a method's Retry-After
// window and failures. Final deliveries (posts, stream stops, answers)
// wait out a window and are retried; live calls (updates, appends, the
// status) never wait it out: they return *chat.RateLimitError at once, so
// the stream controller keeps only the latest text.
type kind int

const (
	kindFinal  kind = iota // paced, waits out windows, retried
	kindLive               // paced (short wait), never waits out a window, not retried
	kindUpload             // paced, waits out windows, not retried (the body is a stream)
)

const maxAttempts = 4

// maxPauseWait is the longest Retry-After a final call waits out; a longer
// one is returned as a RateLimitError.
const maxPauseWait = 5 * time.Minute

// op names one call: its method (the pace and the Retry-After window
// are per method, across the workspace) and where it goes.
type op struct {
	method  string
	team    string
	channel string
	kind    kind
	// msg is the ts of the message a call changes (an update, an append,
	// a stop); such calls are paced to one a second per message (appends
	// to one every appendInterval).
	msg string
}

// caller makes Web API calls under the pace, with retries, typed and
// redacted errors, and missing scopes logged once.
type caller struct {
	limiter   *limiter
	log       *slog.Logger
	secrets   []secret.Secret // removed from every error and log line
	retryBase time.Duration

	mu     sync.Mutex
	scopes map[string]bool // missing scopes already logged
}

// errAuth marks a token Slack refuses.
var errAuth = errors.New("token refused")

// do runs fn under the method's pace with retries and returns a redacted
// error.
func (a *caller) do(ctx context.Context, o op, fn func(context.Context) error) error {
	live := o.kind == kindLive
	for attempt := 1; ; attempt++ {
		if err := a.limiter.acquire(ctx, o, live); err != nil {
			return a.wrap(o.method, err)
		}
		err := fn(ctx)
		if err == nil {
			return nil
		}
		var rl *slackapi.RateLimitedError
		if errors.As(err, &rl) {
			ra := max(rl.RetryAfter, time.Second)
			if perr := a.limiter.pause(ctx, o.team, o.method, ra); perr != nil {
				a.log.Warn("slack: the other replicas do not know of the pause", "method", o.method, "err", perr)
			}
			a.log.Warn("slack: 429; the method waits across the workspace", "method", o.method, "retry_after", ra)
			if live || o.kind == kindUpload || attempt >= maxAttempts || ra > maxPauseWait {
				return fmt.Errorf("slack: %s: %w", o.method, &chat.RateLimitError{RetryAfter: ra, Scope: "bot"})
			}
			continue
		}
		if o.kind == kindFinal && attempt < maxAttempts && temporary(err) && ctx.Err() == nil {
			d := backoff.Jitter(backoff.Exp(a.retryBase, attempt, 0))
			a.log.Warn("slack: call failed; retrying", "method", o.method, "attempt", attempt, "in", d, "err", a.redact(err))
			if serr := tokenbucket.Wait(ctx, d); serr != nil {
				return a.wrap(o.method, serr)
			}
			continue
		}
		return a.wrap(o.method, err)
	}
}

// temporary reports a 5xx or a network failure.
func temporary(err error) bool {
	var sc slackapi.StatusCodeError
	if errors.As(err, &sc) {
		return sc.Code >= 500
	}
	var ue *url.Error
	var ne net.Error
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return errors.As(err, &ue) || errors.As(err, &ne)
}

// apiError is a failed call with every secret removed from its text. It
// unwraps only to kinds that carry no secret.
type apiError struct {
	method string
	msg    string
	code   string // Slack's error code ("message_not_found"), if any
	kinds  []error
}

func (e *apiError) Error() string   { return "slack: " + e.method + ": " + e.msg }
func (e *apiError) Unwrap() []error { return e.kinds }

// notFound are Slack's answers for a message or conversation that is gone.
var notFound = map[string]bool{
	"message_not_found": true, "channel_not_found": true, "cant_update_message": true,
	"cant_delete_message": true, "thread_not_found": true, "no_item_specified": true,
	"is_archived": true, "not_in_channel": true,
}

// wrap turns err into an *apiError; RateLimitErrors pass through. A
// missing scope is logged once with the scope's name.
func (a *caller) wrap(method string, err error) error {
	var rl *chat.RateLimitError
	if errors.As(err, &rl) {
		return fmt.Errorf("slack: %s: %w", method, rl)
	}
	e := &apiError{method: method, msg: a.redact(err)}
	for _, k := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, k) {
			e.kinds = append(e.kinds, k)
		}
	}
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) {
		e.code = se.Err
		switch {
		case notFound[se.Err]:
			e.kinds = append(e.kinds, chat.ErrNotFound)
		case se.Err == "invalid_auth" || se.Err == "not_authed" || se.Err == "token_revoked" || se.Err == "account_inactive":
			e.kinds = append(e.kinds, errAuth)
		case se.Err == "missing_scope":
			a.missingScope(method, se.Needed)
			e.msg += " (the app needs the scope " + se.Needed + "; reinstall it from `pibot slack manifest`)"
		}
	}
	return e
}

// missingScope logs a missing scope once per scope.
func (a *caller) missingScope(method, scope string) {
	a.mu.Lock()
	seen := a.scopes[scope]
	a.scopes[scope] = true
	a.mu.Unlock()
	if !seen {
		a.log.Error("slack: the app lacks a scope; add it (pibot slack manifest lists them) and reinstall the app",
			"scope", scope, "method", method)
	}
}

// code returns Slack's error code of err, "" if none.
func code(err error) string {
	var e *apiError
	if errors.As(err, &e) {
		return e.code
	}
	return ""
}

// redact returns err's text without the tokens and the signing secret.
func (a *caller) redact(err error) string {
	if err == nil {
		return ""
	}
	return secret.Redact(err.Error(), a.secrets...)
}
