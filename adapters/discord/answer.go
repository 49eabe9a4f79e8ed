package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// Kinds of interaction handles (chat.Interaction.Data).
const (
	kindCommand          = "c"  // a command deferred visibly
	kindCommandEphemeral = "ce" // a command deferred ephemerally
	kindButton           = "b"  // a button press, deferred as an update
)

// handleData is the adapter state in chat.Interaction.Data: the kind and
// the application id the interaction token belongs to.
type handleData struct {
	kind string
	app  string
}

func (h handleData) String() string { return h.kind + ":" + h.app }

func parseHandleData(s string) (handleData, error) {
	kind, app, ok := strings.Cut(s, ":")
	switch {
	case !ok, kind != kindCommand && kind != kindCommandEphemeral && kind != kindButton, app != "" && !isID(app):
		return handleData{}, fmt.Errorf("discord: answer: unreadable interaction data %q", s)
	}
	return handleData{kind: kind, app: app}, nil
}

// answerer answers interactions: the acknowledgement within 3 s,
// answers and follow-ups through the token, the fallback to ordinary
// messages after the deadline.
type answerer struct {
	calls *caller
	edits *editLog
	log   *slog.Logger
	// out posts and edits ordinary messages (the late fallback).
	out chat.Adapter
	// app returns the application id.
	app func(ctx context.Context) (string, error)

	mu     sync.Mutex
	acking map[string]chan struct{} // acknowledgements in flight in this process
}

// notice answers an interaction at once with a message only its user
// sees.
func (x *answerer) notice(ctx context.Context, ix *discordgo.Interaction, text string) {
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()}}
	err := x.calls.do(ctx, modeAck, "interactions/"+ix.ID, "answer interaction", func(opts ...discordgo.RequestOption) error {
		return x.calls.s.InteractionRespond(ix, resp, opts...)
	})
	if err != nil {
		x.log.Warn("discord: interaction answer failed", "id", ix.ID, "err", err)
	}
}

// Answer answers an interaction through its token, from any replica (see
// answerer.answer).
func (a *Adapter) Answer(ctx context.Context, ix chat.Interaction, r chat.Answer) (chat.MsgRef, error) {
	return a.answerer.answer(ctx, ix, r)
}

// tokenHandle is a message reachable through an interaction token
// (chat.MsgRef.Handle): an interaction's answer or follow-up.
type tokenHandle struct {
	app, token string
}

func (h tokenHandle) String() string { return "ix:" + h.app + ":" + h.token }

func parseHandle(s string) (tokenHandle, bool) {
	rest, ok := strings.CutPrefix(s, "ix:")
	if !ok {
		return tokenHandle{}, false
	}
	app, tok, ok := strings.Cut(rest, ":")
	if !ok || !isID(app) || tok == "" || strings.ContainsAny(tok, "/?# ") {
		return tokenHandle{}, false
	}
	return tokenHandle{app: app, token: tok}, true
}

func (h tokenHandle) route() string { return "webhooks/" + h.app + "/" + shortHash(h.token) }

// acknowledge gives Discord its answer within 3 s once the sink took the
// interaction: a deferred message for a command (ephemeral for commands
// that concern only the user), a deferred update for a button. When the
// sink failed the user is told so, ephemerally.
func (x *answerer) acknowledge(ctx context.Context, ix *discordgo.Interaction, in chat.Inbound, sinkErr error) {
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}
	if sinkErr != nil {
		x.log.Warn("discord: interaction not taken", "id", ix.ID, "err", sinkErr)
		x.notice(ctx, ix, "pibot could not take this right now; please try again.")
		return
	}
	if in.Interaction != nil {
		if h, err := parseHandleData(in.Interaction.Data); err == nil && h.kind != kindButton {
			resp = &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
				Data: &discordgo.InteractionResponseData{}}
			if h.kind == kindCommandEphemeral {
				resp.Data.Flags = discordgo.MessageFlagsEphemeral
			}
		}
	}
	err := x.calls.do(ctx, modeAck, "interactions/"+ix.ID, "acknowledge interaction", func(opts ...discordgo.RequestOption) error {
		return x.calls.s.InteractionRespond(ix, resp, opts...)
	})
	if err != nil {
		x.log.Warn("discord: interaction acknowledgement failed", "id", ix.ID, "err", err)
	}
}

// Answer answers an interaction through its token, from any replica.
//
// A command was deferred (visibly, or ephemerally for status, help and
// usage): the Reply (or, without one, the Toast) replaces the "thinking…"
// answer when their visibility matches; otherwise the Reply is a follow-up
// with its own visibility and the placeholder is deleted. A button press:
// Replace edits the message with the buttons, the Toast is an ephemeral
// follow-up, the Reply a follow-up. After the 15-minute deadline (or when
// Discord no longer knows the token) Replace becomes an ordinary edit and
// Reply and Toast normal messages in the conversation.
func (x *answerer) answer(ctx context.Context, ix chat.Interaction, r chat.Answer) (chat.MsgRef, error) {
	if ix.Platform != platform || !isID(ix.ID) || ix.Token == "" {
		return chat.MsgRef{}, errors.New("discord: answer: not a Discord interaction")
	}
	hd, err := parseHandleData(ix.Data)
	if err != nil {
		return chat.MsgRef{}, err
	}
	if hd.app == "" {
		if hd.app, err = x.app(ctx); err != nil {
			return chat.MsgRef{}, err
		}
	}
	th := tokenHandle{app: hd.app, token: ix.Token}
	if ix.Expired(time.Now()) {
		return x.answerLate(ctx, ix, r)
	}
	x.waitAck(ctx, ix.ID)
	ref, err := x.answerToken(ctx, ix, hd, th, r)
	// The answer may overtake the acknowledgement (made by the replica
	// that received the interaction, within 3 s of it): until then Discord
	// does not know the token yet.
	for errors.Is(err, chat.ErrExpired) && !ix.Deadline.IsZero() && time.Since(ix.Deadline.Add(-interactionDeadline)) < ackGrace {
		if tokenbucket.Wait(ctx, 250*time.Millisecond) != nil {
			break
		}
		ref, err = x.answerToken(ctx, ix, hd, th, r)
	}
	if errors.Is(err, chat.ErrExpired) {
		return x.answerLate(ctx, ix, r)
	}
	return ref, err
}

// ackGrace is how long after an interaction arrived an answer that
// Discord refuses waits for the acknowledgement to land.
const ackGrace = 5 * time.Second

// startAck marks an interaction's acknowledgement as in flight; the
// returned func marks it done.
func (x *answerer) startAck(id string) func() {
	ch := make(chan struct{})
	x.mu.Lock()
	x.acking[id] = ch
	x.mu.Unlock()
	return func() {
		x.mu.Lock()
		delete(x.acking, id)
		x.mu.Unlock()
		close(ch)
	}
}

// waitAck waits (up to 3 s) for this process's acknowledgement of id.
func (x *answerer) waitAck(ctx context.Context, id string) {
	x.mu.Lock()
	ch := x.acking[id]
	x.mu.Unlock()
	if ch == nil {
		return
	}
	t := time.NewTimer(3 * time.Second)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}

func (x *answerer) answerToken(ctx context.Context, ix chat.Interaction, hd handleData, th tokenHandle, r chat.Answer) (chat.MsgRef, error) {
	if hd.kind == kindButton {
		if rp := r.Replace; rp != nil {
			comps, err := components(rp.Buttons)
			if err != nil {
				return chat.MsgRef{}, err
			}
			if comps == nil {
				comps = []discordgo.MessageComponent{}
			}
			edit := &discordgo.WebhookEdit{Components: &comps, AllowedMentions: noMentions()}
			if rp.Markdown != "" {
				content, err := render(rp.Markdown)
				if err != nil {
					return chat.MsgRef{}, err
				}
				edit.Content = &content
			}
			if err := x.webhookEdit(ctx, th, "@original", edit); err != nil {
				return chat.MsgRef{}, err
			}
		}
		if r.Toast != "" {
			if _, err := x.followUp(ctx, ix.Conv, th, chat.Out{Markdown: r.Toast}, true); err != nil {
				return chat.MsgRef{}, err
			}
		}
		if r.Reply == nil {
			return chat.MsgRef{}, nil
		}
		return x.followUp(ctx, ix.Conv, th, *r.Reply, r.Reply.Ephemeral != "")
	}
	primary, toast := r.Reply, r.Toast
	if primary == nil && toast != "" {
		primary, toast = &chat.Out{Markdown: toast, Ephemeral: ix.User}, ""
	}
	var ref chat.MsgRef
	switch {
	case primary == nil:
		// Nothing to say: the "thinking…" placeholder goes.
		if err := x.webhookDelete(ctx, th, "@original"); err != nil && !errors.Is(err, chat.ErrNotFound) {
			return ref, err
		}
	case (primary.Ephemeral != "") == (hd.kind == kindCommandEphemeral) && len(chunks(primary.Markdown)) == 1:
		content, err := render(primary.Markdown)
		if err != nil {
			return ref, err
		}
		comps, err := components(primary.Buttons)
		if err != nil {
			return ref, err
		}
		if comps == nil {
			comps = []discordgo.MessageComponent{}
		}
		msg, err := x.webhookEditMsg(ctx, th, "@original", &discordgo.WebhookEdit{Content: &content, Components: &comps, AllowedMentions: noMentions()})
		if err != nil {
			return ref, err
		}
		ref = chat.MsgRef{Conv: ix.Conv, ID: msg.ID, Handle: th.String()}
		x.edits.mark(msg.ID, content, comps, true)
	default:
		var err error
		if ref, err = x.followUp(ctx, ix.Conv, th, *primary, primary.Ephemeral != ""); err != nil {
			return ref, err
		}
		if err := x.webhookDelete(ctx, th, "@original"); err != nil && !errors.Is(err, chat.ErrNotFound) {
			x.log.Debug("discord: deleting the deferred answer failed", "err", err)
		}
	}
	if toast != "" {
		if _, err := x.followUp(ctx, ix.Conv, th, chat.Out{Markdown: toast}, true); err != nil {
			return ref, err
		}
	}
	return ref, nil
}

// answerLate delivers an answer without the interaction token.
func (x *answerer) answerLate(ctx context.Context, ix chat.Interaction, r chat.Answer) (chat.MsgRef, error) {
	delivered := false
	if rp := r.Replace; rp != nil && ix.Msg.ID != "" {
		msg := ix.Msg
		msg.Handle = ""
		var err error
		if rp.Markdown != "" {
			err = x.out.Edit(ctx, msg, *rp)
		} else {
			err = x.editButtons(ctx, msg, rp.Buttons)
		}
		if err != nil {
			return chat.MsgRef{}, fmt.Errorf("discord: late answer: %w: %w", chat.ErrExpired, err)
		}
		delivered = true
	}
	if r.Toast != "" {
		if _, err := x.out.Send(ctx, ix.Conv, chat.Out{Markdown: r.Toast, Silent: true}); err != nil {
			return chat.MsgRef{}, err
		}
		delivered = true
	}
	if r.Reply != nil {
		return x.out.Send(ctx, ix.Conv, *r.Reply)
	}
	if !delivered && r.Replace != nil {
		return chat.MsgRef{}, fmt.Errorf("discord: late answer: %w", chat.ErrExpired)
	}
	return chat.MsgRef{}, nil
}

// editButtons replaces only the buttons of a bot message.
func (x *answerer) editButtons(ctx context.Context, ref chat.MsgRef, rows [][]chat.Button) error {
	ch, err := channelOf(ref.Conv)
	if err != nil {
		return err
	}
	id, err := messageID(ref)
	if err != nil {
		return err
	}
	comps, err := components(rows)
	if err != nil {
		return err
	}
	if comps == nil {
		comps = []discordgo.MessageComponent{}
	}
	me := &discordgo.MessageEdit{ID: id, Channel: ch, Components: &comps}
	return x.calls.do(ctx, modeSend, chanRoute(ch, "messages"), "edit buttons", func(opts ...discordgo.RequestOption) error {
		_, err := x.calls.s.ChannelMessageEditComplex(me, opts...)
		return err
	})
}

// followUp posts m through the interaction token, split like Send.
func (x *answerer) followUp(ctx context.Context, conv chat.ConvRef, th tokenHandle, m chat.Out, ephemeral bool) (chat.MsgRef, error) {
	comps, err := components(m.Buttons)
	if err != nil {
		return chat.MsgRef{}, err
	}
	dix := &discordgo.Interaction{AppID: th.app, Token: th.token}
	parts := chunks(m.Markdown)
	var ref chat.MsgRef
	for i, md := range parts {
		content, err := render(md)
		if err != nil {
			return ref, err
		}
		p := &discordgo.WebhookParams{Content: content, AllowedMentions: noMentions(), Flags: discordgo.MessageFlagsSuppressEmbeds}
		if ephemeral {
			p.Flags |= discordgo.MessageFlagsEphemeral
		}
		if i == len(parts)-1 {
			p.Components = comps
		}
		var msg *discordgo.Message
		err = x.calls.do(ctx, modeSend, th.route(), "follow-up", func(opts ...discordgo.RequestOption) (err error) {
			msg, err = x.calls.s.FollowupMessageCreate(dix, true, p, opts...)
			return err
		})
		if err != nil {
			return ref, err
		}
		ref = chat.MsgRef{Conv: conv, ID: msg.ID, Handle: th.String()}
		x.edits.mark(msg.ID, content, comps, false)
	}
	return ref, nil
}

// webhookEdit edits a message through an interaction token.
func (x *answerer) webhookEdit(ctx context.Context, th tokenHandle, id string, e *discordgo.WebhookEdit) error {
	_, err := x.webhookEditMsg(ctx, th, id, e)
	return err
}

func (x *answerer) webhookEditMsg(ctx context.Context, th tokenHandle, id string, e *discordgo.WebhookEdit) (*discordgo.Message, error) {
	var msg *discordgo.Message
	err := x.calls.do(ctx, modeSend, th.route(), "edit through the interaction", func(opts ...discordgo.RequestOption) (err error) {
		msg, err = x.calls.s.WebhookMessageEdit(th.app, th.token, id, e, opts...)
		return err
	})
	return msg, err
}

func (x *answerer) webhookDelete(ctx context.Context, th tokenHandle, id string) error {
	return x.calls.do(ctx, modeSend, th.route(), "delete through the interaction", func(opts ...discordgo.RequestOption) error {
		return x.calls.s.WebhookMessageDelete(th.app, th.token, id, opts...)
	})
}
