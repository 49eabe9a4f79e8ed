package discord

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/backoff"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// mode is how a REST call meets rate windows and failures.
//
// Live calls (edits, typing) never wait for a window longer than
// liveMaxWait: they return *chat.RateLimitError at once, so the stream
// controller keeps only the latest text. Sends and one-off calls wait a
// window out (up to maxPauseWait) and retry 5xx, network failures and 429
// up to maxAttempts; uploads are not retried (their body was consumed).
type mode int

const (
	modeSend   mode = iota // waits, retried
	modeUpload             // waits, not retried
	modeLive               // short wait only, not retried
	modeAck                // interaction callbacks: no wait (3 s deadline), retried once quickly
)

const (
	maxAttempts  = 4
	liveMaxWait  = 1500 * time.Millisecond
	maxPauseWait = 2 * time.Minute
	retryBase    = 400 * time.Millisecond
	callTimeout  = 30 * time.Second
)

// Discord JSON error codes the adapter acts on.
const (
	codeUnknownChannel     = 10003
	codeUnknownMessage     = 10008
	codeUnknownWebhook     = 10015
	codeUnknownInteraction = 10062
	codeThreadExists       = 160004
	codeAlreadyAcked       = 40060
)

// do runs one REST call on route under the rate windows with bounded
// retries, and returns an error with every secret removed.
func (r *caller) do(ctx context.Context, m mode, route, op string, fn func(opts ...discordgo.RequestOption) error) error {
	for attempt := 1; ; attempt++ {
		if err := r.refusedErr(); err != nil {
			return err
		}
		if d := r.limiter.wait(route); d > 0 {
			if (m == modeLive && d > liveMaxWait) || m == modeAck || d > maxPauseWait {
				return fmt.Errorf("discord: %s: %w", op, &chat.RateLimitError{RetryAfter: d, Scope: "chat"})
			}
			if err := tokenbucket.Wait(ctx, d); err != nil {
				return fmt.Errorf("discord: %s: %w", op, err)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := fn(discordgo.WithContext(cctx))
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrTokenRefused) {
			return err
		}
		var rl *rateLimited
		if errors.As(err, &rl) {
			scope := "chat"
			if rl.global {
				scope = "global"
			}
			if m == modeLive || m == modeUpload || attempt >= maxAttempts || rl.retryAfter > maxPauseWait {
				return fmt.Errorf("discord: %s: %w", op, &chat.RateLimitError{RetryAfter: rl.retryAfter, Scope: scope})
			}
			continue // the next turn waits the window out
		}
		if temporary(err) && ctx.Err() == nil && (m == modeSend || (m == modeAck && attempt < 2)) && attempt < maxAttempts {
			d := backoff.Jitter(backoff.Exp(retryBase, attempt, 0))
			r.log.Warn("discord: call failed; retrying", "op", op, "attempt", attempt, "in", d, "err", r.clean(err))
			if serr := tokenbucket.Wait(ctx, d); serr != nil {
				return fmt.Errorf("discord: %s: %w", op, serr)
			}
			continue
		}
		return r.wrap(op, err)
	}
}

// temporary reports a 5xx or a network failure.
func temporary(err error) bool {
	var se *serverError
	if errors.As(err, &se) {
		return true
	}
	var ue *url.Error
	return errors.As(err, &ue) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// apiError is a failed call with its text cleaned of secrets. It unwraps
// to chat.ErrNotFound, chat.ErrExpired and context errors only.
type apiError struct {
	op    string
	msg   string
	code  int
	kinds []error
}

func (e *apiError) Error() string   { return "discord: " + e.op + ": " + e.msg }
func (e *apiError) Unwrap() []error { return e.kinds }

// restCode returns Discord's JSON error code and HTTP status of err.
func restCode(err error) (code, status int) {
	var re *discordgo.RESTError
	if !errors.As(err, &re) {
		return 0, 0
	}
	if re.Response != nil {
		status = re.Response.StatusCode
	}
	if re.Message != nil {
		code = re.Message.Code
	}
	return code, status
}

func (r *caller) wrap(op string, err error) error {
	e := &apiError{op: op}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		e.msg = "HTTP " + re.Response.Status
		if re.Message != nil {
			e.code = re.Message.Code
			e.msg += fmt.Sprintf(": %s (code %d)", re.Message.Message, re.Message.Code)
		}
	} else {
		e.msg = r.clean(err)
	}
	code, status := restCode(err)
	switch {
	case code == codeUnknownMessage || code == codeUnknownChannel || (status == 404 && code == 0):
		e.kinds = append(e.kinds, chat.ErrNotFound)
	case code == codeUnknownWebhook || code == codeUnknownInteraction || code == codeAlreadyAcked:
		e.kinds = append(e.kinds, chat.ErrExpired)
	}
	for _, k := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, k) {
			e.kinds = append(e.kinds, k)
		}
	}
	return e
}

// clean returns err's text without the bot token or interaction tokens
// (which appear in webhook URLs).
func (r *caller) clean(err error) string {
	s := err.Error()
	// A transport error names the URL discordgo built; the call went to
	// the configured root (adapters.discord.api_url).
	for _, host := range []string{discordgo.EndpointAPI, strings.Replace(discordgo.EndpointAPI, "discord.com", "discordapp.com", 1)} {
		s = strings.ReplaceAll(s, host, r.root+"/")
	}
	if tok := r.token.Reveal(); tok != "" {
		s = strings.ReplaceAll(s, tok, "REDACTED")
	}
	// Interaction tokens sit in /webhooks/<app>/<token> and
	// /interactions/<id>/<token>/callback.
	for _, marker := range []string{"/webhooks/", "/interactions/"} {
		for i := strings.Index(s, marker); i >= 0; {
			rest := s[i+len(marker):]
			parts := strings.SplitN(rest, "/", 3)
			if len(parts) >= 2 {
				tok := strings.FieldsFunc(parts[1], func(r rune) bool { return r == '?' || r == '"' || r == ' ' })
				if len(tok) > 0 && len(tok[0]) > 0 {
					s = s[:i+len(marker)] + strings.Replace(rest, tok[0], "REDACTED", 1)
				}
			}
			next := strings.Index(s[i+len(marker):], marker)
			if next < 0 {
				break
			}
			i += len(marker) + next
		}
	}
	return s
}
