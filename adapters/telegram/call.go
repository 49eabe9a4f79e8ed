package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/backoff"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// mode is how a Bot API call meets the pacing, a bot-wide retry_after
// pause and failures.
//
// The rule: final deliveries (sends, uploads) and one-off calls (callback
// answers, commands, getFile) wait out a retry_after pause for the whole
// bot; live calls (edits, drafts, typing) never wait it out: they return
// *chat.RateLimitError{Scope: "bot"} at once, so the stream controller can
// keep only the latest text. Sends and one-off calls retry 5xx, network
// errors and 429 up to maxAttempts; uploads are not retried (their body is
// a stream that was consumed).
type mode int

const (
	modeSend   mode = iota // paced, waits out pauses, retried
	modeUpload             // paced, waits out pauses, not retried
	modeLive               // paced (short wait), never waits out a pause, not retried
	modeStatus             // not paced, never waits out a pause, not retried
	modeAdmin              // not paced, waits out pauses, retried
)

func (m mode) paced() bool   { return m == modeSend || m == modeUpload || m == modeLive }
func (m mode) live() bool    { return m == modeLive || m == modeStatus }
func (m mode) retried() bool { return m == modeSend || m == modeAdmin }

func (m mode) timeout() time.Duration {
	if m == modeUpload {
		return 5 * time.Minute
	}
	return 30 * time.Second
}

const (
	maxAttempts = 4
	// maxPauseWait is the longest retry_after a blocking call waits out
	// after a 429; a longer one is returned as a RateLimitError.
	maxPauseWait = 5 * time.Minute
)

// Error kinds that callers match with errors.Is.
var (
	errEntities = errors.New("can't parse entities")
	errRetry    = errors.New("temporary failure")
)

// caller makes the adapter's Bot API calls: every call goes through the
// pacing (limiter), the bot-wide pause after a 429, retries of 5xx and
// network failures, and comes back with an error that holds no secret.
type caller struct {
	token    secret.Secret
	whSecret secret.Secret // redacted from errors too
	api      string        // Bot API base URL, no trailing slash
	client   *http.Client
	bot      *bot.Bot
	limiter  *limiter
	log      *slog.Logger

	// retryBase is the first back-off step of a retried call.
	retryBase time.Duration
}

// do runs one Bot API call under the pacing with retries, and returns
// a redacted error.
func (c *caller) do(ctx context.Context, m mode, chatID int64, op string, fn func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		if err := c.limiter.acquire(ctx, chatID, m); err != nil {
			return c.wrap(op, err)
		}
		cctx, cancel := context.WithTimeout(ctx, m.timeout())
		err := fn(cctx)
		cancel()
		if err == nil {
			return nil
		}
		var tooMany *bot.TooManyRequestsError
		switch {
		case isNotModified(err):
			return nil
		case errors.As(err, &tooMany):
			ra := time.Duration(max(tooMany.RetryAfter, 1)) * time.Second
			if perr := c.limiter.pause(ctx, ra); perr != nil {
				c.log.Warn("telegram: the other replicas were not told to wait", "err", perr)
			}
			c.log.Warn("telegram: 429 Too Many Requests; every call waits", "op", op, "retry_after", ra)
			if m.live() || !m.retried() || attempt >= maxAttempts || ra > maxPauseWait {
				return fmt.Errorf("telegram: %s: %w", op, &chat.RateLimitError{RetryAfter: ra, Scope: "bot"})
			}
			continue
		case isTemporary(err) && ctx.Err() == nil:
			if m.retried() && attempt < maxAttempts {
				d := c.backoff(attempt)
				c.log.Warn("telegram: call failed; retrying", "op", op, "attempt", attempt, "in", d, "err", c.redact(err))
				if serr := tokenbucket.Wait(ctx, d); serr != nil {
					return c.wrap(op, serr)
				}
				continue
			}
		}
		return c.wrap(op, err)
	}
}

func (c *caller) backoff(attempt int) time.Duration {
	return backoff.Jitter(backoff.Exp(c.retryBase, attempt, 0))
}

func isNotModified(err error) bool {
	return errors.Is(err, bot.ErrorBadRequest) && strings.Contains(err.Error(), "message is not modified")
}

// isTemporary reports a 5xx or a network failure.
func isTemporary(err error) bool {
	var se *serverError
	var ue *url.Error
	if errors.As(err, &se) {
		return true
	}
	return errors.As(err, &ue) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// getMe calls getMe until it succeeds, backing off on temporary failures,
// and returns the bot's own user. A rejected token fails at once. failed,
// if not nil, hears every temporary failure before the back-off.
func (c *caller) getMe(ctx context.Context, failed func(error)) (identity, error) {
	for attempt := 1; ; attempt++ {
		var me *models.User
		err := c.do(ctx, modeAdmin, 0, "getMe", func(ctx context.Context) (err error) {
			me, err = c.bot.GetMe(ctx)
			return err
		})
		if err == nil {
			return identity{id: me.ID, username: me.Username}, nil
		}
		if errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound) {
			return identity{}, fmt.Errorf("telegram: the bot token (adapters.telegram.token) was rejected: %w", err)
		}
		if ctx.Err() != nil {
			return identity{}, ctx.Err()
		}
		d := backoff.Exp(c.retryBase, min(attempt, 7)+1, maxBackoff)
		if failed != nil {
			failed(err)
		}
		c.log.Warn("telegram: getMe failed; retrying", "in", d, "err", err)
		if err := tokenbucket.Wait(ctx, d); err != nil {
			return identity{}, err
		}
	}
}

// apiError is a failed call with every secret removed from its text. It
// unwraps only to kinds that carry no secret: the library's sentinel
// errors, chat.ErrNotFound, context errors, *bot.MigrateError.
type apiError struct {
	op    string
	msg   string
	kinds []error
}

func (e *apiError) Error() string   { return "telegram: " + e.op + ": " + e.msg }
func (e *apiError) Unwrap() []error { return e.kinds }

// wrap turns err into an *apiError; RateLimitErrors pass through.
func (c *caller) wrap(op string, err error) error {
	var rl *chat.RateLimitError
	if errors.As(err, &rl) {
		return fmt.Errorf("telegram: %s: %w", op, rl)
	}
	e := &apiError{op: op, msg: c.redact(err)}
	for _, k := range []error{context.Canceled, context.DeadlineExceeded, bot.ErrorForbidden,
		bot.ErrorBadRequest, bot.ErrorUnauthorized, bot.ErrorNotFound, bot.ErrorConflict} {
		if errors.Is(err, k) {
			e.kinds = append(e.kinds, k)
		}
	}
	desc := err.Error()
	if errors.Is(err, bot.ErrorNotFound) || strings.Contains(desc, "message to edit not found") ||
		strings.Contains(desc, "message to delete not found") || strings.Contains(desc, "message can't be edited") ||
		strings.Contains(desc, "message can't be deleted") || strings.Contains(desc, "message to react not found") {
		e.kinds = append(e.kinds, chat.ErrNotFound)
	}
	if strings.Contains(desc, "can't parse entities") {
		e.kinds = append(e.kinds, errEntities)
	}
	if isTemporary(err) {
		e.kinds = append(e.kinds, errRetry)
	}
	var mig *bot.MigrateError
	if errors.As(err, &mig) {
		e.kinds = append(e.kinds, &bot.MigrateError{Message: mig.Message, MigrateToChatID: mig.MigrateToChatID})
	}
	return e
}

// redact returns err's text without the bot token or webhook secret.
func (c *caller) redact(err error) string {
	if err == nil {
		return ""
	}
	return c.redactString(err.Error())
}

func (c *caller) redactString(s string) string {
	tok := c.token.Reveal()
	s = secret.Redact(s, c.token, c.whSecret)
	for _, form := range []string{url.PathEscape(tok), url.QueryEscape(tok), strings.ReplaceAll(tok, ":", "%3A")} {
		s = strings.ReplaceAll(s, form, "REDACTED")
	}
	return s
}

// serverError is an HTTP 5xx answer. statusTransport turns it into a
// transport error, so that it reaches do as a retryable failure whatever
// the body says.
type serverError struct{ status int }

func (e *serverError) Error() string { return fmt.Sprintf("server answered HTTP %d", e.status) }

type statusTransport struct{ base http.RoundTripper }

func (t statusTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		// RoundTrip must close the body; a transport that does not would
		// leave the client's form writer blocked on its pipe.
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	if resp.StatusCode >= 500 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return nil, &serverError{status: resp.StatusCode}
	}
	return resp, nil
}

// apiResponse is the Bot API envelope.
type apiResponse struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	Description string          `json:"description"`
	ErrorCode   int             `json:"error_code"`
	Parameters  struct {
		RetryAfter      int   `json:"retry_after"`
		MigrateToChatID int64 `json:"migrate_to_chat_id"`
	} `json:"parameters"`
}

// raw calls a Bot API method with a JSON body (for getUpdates, whose
// offset the library would confirm too early). Errors have the library's
// types.
func (c *caller) raw(ctx context.Context, method string, params, dest any) error {
	body, err := json.Marshal(params)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.api+"/bot"+c.token.Reveal()+"/"+method, bytes.NewReader(body))
	if err != nil {
		return errors.New(c.redactString(err.Error()))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var r apiResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&r); err != nil {
		return fmt.Errorf("decode %s answer (HTTP %d): %w", method, resp.StatusCode, err)
	}
	if !r.OK {
		switch r.ErrorCode {
		case http.StatusTooManyRequests:
			return &bot.TooManyRequestsError{Message: "too many requests, " + r.Description, RetryAfter: r.Parameters.RetryAfter}
		case http.StatusConflict:
			return fmt.Errorf("%w, %s", bot.ErrorConflict, r.Description)
		case http.StatusUnauthorized:
			return fmt.Errorf("%w, %s", bot.ErrorUnauthorized, r.Description)
		case http.StatusForbidden:
			return fmt.Errorf("%w, %s", bot.ErrorForbidden, r.Description)
		case http.StatusNotFound:
			return fmt.Errorf("%w, %s", bot.ErrorNotFound, r.Description)
		case http.StatusBadRequest:
			return fmt.Errorf("%w, %s", bot.ErrorBadRequest, r.Description)
		}
		return fmt.Errorf("%s: error %d, %s", method, r.ErrorCode, r.Description)
	}
	if dest != nil {
		return json.Unmarshal(r.Result, dest)
	}
	return nil
}
