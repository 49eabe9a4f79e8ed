package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-telegram/bot"

	"github.com/pibot/pibot/chat"
)

// maxToast is the longest callback answer text Telegram shows.
const maxToast = 200

// callbackDeadline is how long after a press its callback query is
// answered through answerCallbackQuery. Telegram documents no number;
// stale queries fail with "query is too old", and clients stop their
// spinner after a few seconds anyway, so this stays on the safe side.
const callbackDeadline = 10 * time.Second

// answerer answers button presses (callback queries).
type answerer struct {
	out *sender
	log *slog.Logger
}

// answer answers a button press (see Adapter.Answer): toast first, then
// the replacement of the pressed message, then the reply.
func (a *answerer) answer(ctx context.Context, ix chat.Interaction, r chat.Answer) (chat.MsgRef, error) {
	if ix.Platform != platform || ix.ID == "" {
		return chat.MsgRef{}, errors.New("telegram: answer: not a Telegram callback query")
	}
	if err := a.answerCallback(ctx, ix, r.Toast); err != nil {
		return chat.MsgRef{}, err
	}
	if err := a.replace(ctx, ix.Msg, r.Replace); err != nil {
		return chat.MsgRef{}, err
	}
	if r.Reply == nil {
		return chat.MsgRef{}, nil
	}
	return a.out.send(ctx, ix.Conv, *r.Reply)
}

// answerCallback shows toast as the callback answer, or as a message once
// the query can no longer be answered.
func (a *answerer) answerCallback(ctx context.Context, ix chat.Interaction, toast string) error {
	toast = truncateUTF16(toast, maxToast)
	if !ix.Expired(time.Now()) {
		err := a.out.calls.do(ctx, modeAdmin, 0, "answer callback", func(ctx context.Context) error {
			_, err := a.out.calls.bot.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: ix.ID, Text: toast})
			return err
		})
		if err == nil || !errors.Is(err, bot.ErrorBadRequest) {
			return err
		}
		a.log.Debug("telegram: callback query too old; the toast becomes a message", "err", err)
	}
	if toast == "" {
		return nil
	}
	out := chat.Out{Markdown: toast, Silent: true}
	if ix.Msg.ID != "" {
		out.ReplyTo = &ix.Msg
	}
	if _, err := a.out.send(ctx, ix.Conv, out); err != nil {
		return fmt.Errorf("telegram: answer: %w", err)
	}
	return nil
}

// replace applies an Answer's Replace to the message with the buttons.
func (a *answerer) replace(ctx context.Context, ref chat.MsgRef, r *chat.Out) error {
	if r == nil || ref.ID == "" {
		return nil
	}
	if r.Markdown != "" {
		return a.out.edit(ctx, ref, *r)
	}
	chatID, id, err := a.out.chats.message(ref)
	if err != nil {
		return err
	}
	markup, err := keyboard(r.Buttons)
	if err != nil {
		return fmt.Errorf("telegram: answer: %w", err)
	}
	return a.out.calls.do(ctx, modeSend, chatID, "edit keyboard", func(ctx context.Context) error {
		_, err := a.out.calls.bot.EditMessageReplyMarkup(ctx, &bot.EditMessageReplyMarkupParams{ChatID: chatID, MessageID: id, ReplyMarkup: markup})
		return err
	})
}
