package telegram

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-telegram/bot"

	"github.com/pibot/pibot/chat"
)

// maxToast is the longest callback answer text Telegram shows.
const maxToast = 200

// Respond answers a button press: answerCallbackQuery with the toast (this
// ends the client's spinner, so it goes first), then, if r.Replace is set,
// the message that carried the buttons is edited: new text and buttons, or
// with an empty Markdown only the keyboard is removed (or replaced).
func (a *Adapter) Respond(ctx context.Context, in chat.Inbound, r chat.ActionReply) error {
	if in.Action == nil || in.Action.Token == "" {
		return errors.New("telegram: respond: the inbound event is not a button press")
	}
	toast := truncateUTF16(r.Toast, maxToast)
	err := a.do(ctx, modeAdmin, 0, "answer callback", func(ctx context.Context) error {
		_, err := a.bot.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: in.Action.Token, Text: toast})
		return err
	})
	if err != nil {
		return err
	}
	if r.Replace == nil || in.Action.Msg.ID == "" {
		return nil
	}
	if r.Replace.Markdown != "" {
		return a.Edit(ctx, in.Action.Msg, *r.Replace)
	}
	chatID, _, err := a.target(in.Action.Msg.Conv)
	if err != nil {
		return err
	}
	id, err := msgID(in.Action.Msg)
	if err != nil {
		return err
	}
	markup, err := keyboard(r.Replace.Buttons)
	if err != nil {
		return fmt.Errorf("telegram: respond: %w", err)
	}
	return a.do(ctx, modeSend, chatID, "edit keyboard", func(ctx context.Context) error {
		_, err := a.bot.EditMessageReplyMarkup(ctx, &bot.EditMessageReplyMarkupParams{ChatID: chatID, MessageID: id, ReplyMarkup: markup})
		return err
	})
}
