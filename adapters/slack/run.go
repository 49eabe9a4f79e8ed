package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/backoff"
	"github.com/pibot/pibot/internal/tokenbucket"
)

const maxBackoff = 2 * time.Minute

// Run learns the bot's identity (auth.test), then receives events until
// ctx ends and returns nil then: through Socket Mode, or in http mode
// through EventsHandler. A refused token ends Run with an error.
func (a *Adapter) Run(ctx context.Context, sink chat.Sink) error { return a.recv.run(ctx, sink) }

// Health returns nil while the adapter can work, or why it cannot: it
// stopped because Slack refused the bot or app token, or it is still
// starting because auth.test failed and is retried in the background.
// pibot keeps serving its other adapters and fails /readyz with this
// error.
func (a *Adapter) Health() error {
	if err := a.recv.refused.Load(); err != nil {
		return *err
	}
	if err := a.recv.starting.Load(); err != nil {
		return *err
	}
	return nil
}

// receiver receives Slack's deliveries, through Socket Mode or HTTP, and
// hands them to the sink; it acknowledges a delivery only once the sink
// took it.
type receiver struct {
	cfg       Config
	api       *slackapi.Client
	calls     *caller
	rd        *reader
	log       *slog.Logger
	retryBase time.Duration

	ready     chan struct{} // closed when run first has a sink (http mode)
	readyOnce sync.Once

	// foreignN counts deliveries of another workspace or app, dropped.
	foreignN atomic.Uint64
	// refused is why run stopped for good (Slack refused a token);
	// starting, while auth.test has failed and is being retried.
	refused  atomic.Pointer[error]
	starting atomic.Pointer[error]

	mu      sync.Mutex
	sink    chat.Sink
	foreign map[string]bool // "team/app" of dropped deliveries, logged once each
}

func (a *receiver) run(ctx context.Context, sink chat.Sink) error {
	if err := a.learnIdentity(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		a.refused.Store(&err)
		return err
	}
	if a.cfg.Mode == ModeHTTP {
		a.mu.Lock()
		a.sink = sink
		a.mu.Unlock()
		a.readyOnce.Do(func() { close(a.ready) })
		a.log.Info("slack: receiving events over HTTP", "path", EventsPath)
		<-ctx.Done()
		a.mu.Lock()
		a.sink = nil
		a.mu.Unlock()
		return nil
	}
	return a.runSocket(ctx, sink)
}

// learnIdentity calls auth.test until it succeeds, backing off on
// temporary failures.
func (a *receiver) learnIdentity(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		var r *slackapi.AuthTestResponse
		err := a.calls.do(ctx, op{method: "auth.test", team: "", channel: "", kind: kindFinal}, func(ctx context.Context) (err error) {
			r, err = a.api.AuthTestContext(ctx)
			return err
		})
		if err == nil {
			a.starting.Store(nil)
			a.rd.setIdentity(identity{userID: r.UserID, botID: r.BotID, teamID: r.TeamID})
			a.log.Info("slack: connected", "bot_user", r.UserID, "team", r.TeamID, "mode", a.cfg.Mode)
			return nil
		}
		a.starting.Store(nil)
		if errors.Is(err, errAuth) {
			return fmt.Errorf("slack: the bot token (adapters.slack.bot_token) was refused: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		waiting := fmt.Errorf("slack: starting: Slack has not answered auth.test yet; retrying in the background: %s",
			strings.TrimPrefix(err.Error(), "slack: "))
		a.starting.Store(&waiting)
		d := backoff.Exp(a.retryBase, min(attempt, 8)+1, maxBackoff)
		a.log.Warn("slack: auth.test failed; retrying", "in", d, "err", err)
		if err := tokenbucket.Wait(ctx, d); err != nil {
			return err
		}
	}
}

// runSocket receives events through Socket Mode. slack-go's client
// reconnects on Slack's disconnect envelopes and on network loss; when it
// gives up, it is started again after a back-off. Every envelope is
// acknowledged only after the sink returned nil for it; an envelope the
// sink could not take is left unacknowledged, so Slack delivers it again.
func (a *receiver) runSocket(ctx context.Context, sink chat.Sink) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sm := socketmode.New(a.api, socketmode.OptionPingInterval(a.cfg.PingInterval), socketmode.OptionLog(discard{}))
	fatal := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for attempt := 1; ctx.Err() == nil; attempt++ {
			start := time.Now()
			err := sm.RunContext(ctx)
			if ctx.Err() != nil {
				return
			}
			if msg := a.calls.redact(err); isAuthError(msg) {
				err := fmt.Errorf("slack: the app token (adapters.slack.app_token) was refused: %s", msg)
				a.refused.Store(&err)
				fatal <- err
				cancel()
				return
			}
			if time.Since(start) > time.Minute {
				attempt = 1
			}
			d := backoff.Exp(a.retryBase, min(attempt, 8)+1, maxBackoff)
			a.log.Warn("slack: Socket Mode stopped; reconnecting", "in", d, "err", a.calls.redact(err))
			if tokenbucket.Wait(ctx, d) != nil {
				return
			}
		}
	})
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			select {
			case err := <-fatal:
				return err
			default:
				return nil
			}
		case evt := <-sm.Events:
			a.socketEvent(ctx, sm, sink, evt)
		}
	}
}

func isAuthError(msg string) bool {
	for _, s := range []string{"invalid_auth", "account_inactive", "not_authed", "token_revoked", "not_allowed_token_type", "404 Not Found"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// socketEvent handles one Socket Mode event.
func (a *receiver) socketEvent(ctx context.Context, sm *socketmode.Client, sink chat.Sink, evt socketmode.Event) {
	switch evt.Type {
	case socketmode.EventTypeConnected:
		a.log.Info("slack: Socket Mode connected")
		return
	case socketmode.EventTypeHello:
		// It comes first on every connection, so the app is known before
		// the connection's first event.
		if evt.Request != nil && evt.Request.ConnectionInfo.AppID != "" {
			a.rd.setApp(evt.Request.ConnectionInfo.AppID)
		}
		return
	case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError:
		a.log.Warn("slack: Socket Mode connection trouble", "type", evt.Type, "err", a.calls.redact(asError(evt.Data)))
		return
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("slack: the app token (adapters.slack.app_token) was refused")
		return
	case socketmode.EventTypeErrorBadMessage:
		// An envelope slack-go cannot parse (an event type it does not
		// know) is acknowledged, so Slack does not send it forever.
		if bad, ok := evt.Data.(*socketmode.ErrorBadMessage); ok {
			var env struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if json.Unmarshal(bad.Message, &env) == nil && env.EnvelopeID != "" {
				_ = sm.AckCtx(ctx, env.EnvelopeID, nil)
			}
			a.log.Debug("slack: envelope skipped", "err", bad.Cause)
		}
		return
	}
	req := evt.Request
	if req == nil || req.EnvelopeID == "" {
		return
	}
	var kindName string
	switch evt.Type {
	case socketmode.EventTypeEventsAPI:
		kindName = "events_api"
	case socketmode.EventTypeSlashCommand:
		kindName = "slash_commands"
	case socketmode.EventTypeInteractive:
		kindName = "interactive"
	default:
		_ = sm.AckCtx(ctx, req.EnvelopeID, nil)
		return
	}
	if err := a.deliver(ctx, sink, kindName, req.Payload); err != nil {
		a.log.Log(ctx, chat.RefusedLevel(err), "slack: envelope not taken; Slack will deliver it again", "envelope", req.EnvelopeID,
			"retry_attempt", req.RetryAttempt, "err", err)
		return
	}
	if err := sm.AckCtx(ctx, req.EnvelopeID, nil); err != nil {
		a.log.Warn("slack: ack failed; Slack will deliver the envelope again (dedupe absorbs it)", "envelope", req.EnvelopeID, "err", err)
	}
}

func asError(v any) error {
	switch d := v.(type) {
	case *slackapi.ConnectionErrorEvent:
		return d.ErrorObj
	case *slackapi.IncomingEventError:
		return d.ErrorObj
	case error:
		return d
	}
	return nil
}

// deliver normalises one delivery (events_api, slash_commands or
// interactive, as raw JSON) and hands it to sink. nil means it may be
// acknowledged: taken, or nothing for the gateway.
func (a *receiver) deliver(ctx context.Context, sink chat.Sink, kindName string, payload []byte) error {
	var in chat.Inbound
	var err error
	switch kindName {
	case "events_api":
		in, err = a.rd.eventBody(payload)
	case "slash_commands":
		var sc slackapi.SlashCommand
		if err := json.Unmarshal(payload, &sc); err != nil {
			a.log.Warn("slack: slash command is not JSON; skipped", "err", err)
			return nil
		}
		if sc.Command != a.cfg.Command {
			a.log.Warn("slack: a slash command pibot does not serve; set adapters.slack.command", "command", sc.Command)
			return nil
		}
		in, err = a.rd.slashCommand(sc)
	case "interactive":
		in, err = a.rd.interactionBody(payload)
	}
	if errors.Is(err, errSkip) {
		return nil
	}
	if fe, ok := errors.AsType[*foreignError](err); ok {
		a.dropForeign(kindName, fe)
		return nil
	}
	if err != nil {
		a.log.Warn("slack: delivery skipped", "kind", kindName, "err", err)
		return nil
	}
	return sink(ctx, in)
}

// dropForeign counts a delivery of another workspace or app, and logs
// the first one of each.
func (a *receiver) dropForeign(kindName string, fe *foreignError) {
	a.foreignN.Add(1)
	k := fe.team + "/" + fe.app
	a.mu.Lock()
	seen := a.foreign[k]
	if !seen {
		if a.foreign == nil {
			a.foreign = map[string]bool{}
		}
		a.foreign[k] = true
	}
	a.mu.Unlock()
	if !seen {
		me := a.rd.identity()
		a.log.Warn("slack: deliveries of another workspace or app are dropped (logged once per workspace and app); "+
			"pibot serves the workspace of its bot token only", "kind", kindName, "team", fe.team, "app", fe.app,
			"own_team", me.teamID, "own_app", me.appID)
	}
}

// ForeignDropped counts the deliveries dropped because they came for
// another workspace (team_id) or app (api_app_id) than the bot's own.
func (a *Adapter) ForeignDropped() uint64 { return a.recv.foreignN.Load() }

// discard drops slack-go's own log lines (they may quote payloads).
type discard struct{}

func (discard) Output(int, string) error { return nil }
