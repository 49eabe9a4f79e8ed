package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/pibot/pibot/chat"
)

// answerer answers slash commands and button presses: through the
// interaction's response URL while it is live, else through the Web API.
type answerer struct {
	out     *sender
	calls   *caller
	api     *slackapi.Client
	log     *slog.Logger
	apiHost string // host of APIURL: response URLs must be there or on Slack
}

// answer answers an interaction (see Adapter.Answer).
func (a *answerer) answer(ctx context.Context, ix chat.Interaction, r chat.Answer) (chat.MsgRef, error) {
	if ix.Platform != platform || ix.Conv.Channel == "" {
		return chat.MsgRef{}, errors.New("slack: answer: not a Slack interaction")
	}
	live := !ix.Expired(time.Now()) && a.responseURLOK(ix.ResponseURL)
	if r.Toast != "" {
		if err := a.ephemeral(ctx, ix, live, r.Toast); err != nil {
			return chat.MsgRef{}, err
		}
	}
	if r.Replace != nil && ix.Msg.ID != "" {
		if err := a.replace(ctx, ix, *r.Replace); err != nil {
			return chat.MsgRef{}, err
		}
	}
	if r.Reply == nil {
		return chat.MsgRef{}, nil
	}
	if r.Reply.Ephemeral != "" && len(r.Reply.Buttons) == 0 {
		return chat.MsgRef{Conv: ix.Conv}, a.ephemeral(ctx, ix, live, r.Reply.Markdown)
	}
	ref, err := a.out.send(ctx, ix.Conv, *r.Reply)
	if err != nil && live && len(r.Reply.Buttons) == 0 && errors.Is(err, chat.ErrNotFound) {
		// A slash command in a channel the bot is not in: the response URL
		// still posts there, for everyone (without a ts to edit).
		if rerr := a.respond(ctx, ix, r.Reply.Markdown, slackapi.ResponseTypeInChannel); rerr == nil {
			return chat.MsgRef{Conv: ix.Conv}, nil
		}
	}
	return ref, err
}

// respond posts md through the interaction's response URL.
func (a *answerer) respond(ctx context.Context, ix chat.Interaction, md, responseType string) error {
	return a.calls.do(ctx, op{method: "response_url", team: ix.Conv.Workspace, channel: "", kind: kindFinal}, func(ctx context.Context) error {
		_, _, err := a.api.PostMessageContext(ctx, ix.Conv.Channel,
			slackapi.MsgOptionText(render(md), false), slackapi.MsgOptionResponseURL(ix.ResponseURL, responseType))
		return err
	})
}

// ephemeral shows md to the user of ix only.
func (a *answerer) ephemeral(ctx context.Context, ix chat.Interaction, live bool, md string) error {
	if live {
		err := a.respond(ctx, ix, md, slackapi.ResponseTypeEphemeral)
		if err == nil {
			return nil
		}
		a.log.Debug("slack: response_url refused; posting the answer with chat.postEphemeral", "err", err)
	}
	if ix.User == "" {
		return fmt.Errorf("slack: answer: %w", chat.ErrExpired)
	}
	_, err := a.out.send(ctx, ix.Conv, chat.Out{Markdown: md, Ephemeral: ix.User})
	return err
}

// replace applies an Answer's Replace to the message with the buttons.
func (a *answerer) replace(ctx context.Context, ix chat.Interaction, out chat.Out) error {
	buttons, err := actions(out.Buttons)
	if err != nil {
		return fmt.Errorf("slack: answer: %w", err)
	}
	mrkdwn := ix.Data
	if out.Markdown != "" {
		mrkdwn = render(out.Markdown)
	}
	if strings.TrimSpace(mrkdwn) == "" {
		return errors.New("slack: answer: the pressed message's text is unknown; give Replace a text")
	}
	return a.out.updateRendered(ctx, ix.Msg, mrkdwn, buttons, kindFinal)
}

// responseURLOK reports whether u may receive an answer: https on a Slack
// host, or the api_url host (a test server).
func (a *answerer) responseURLOK(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return false
	}
	if p.Host == a.apiHost {
		return true
	}
	h := p.Hostname()
	return p.Scheme == "https" && (h == "slack.com" || strings.HasSuffix(h, ".slack.com") || strings.HasSuffix(h, ".slack-gov.com"))
}
