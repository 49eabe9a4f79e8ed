package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
)

// keyboard builds an inline keyboard; nil for no buttons.
func keyboard(rows [][]chat.Button) (models.ReplyMarkup, error) {
	var kb [][]models.InlineKeyboardButton
	for _, row := range rows {
		var r []models.InlineKeyboardButton
		for _, b := range row {
			if b.ID == "" || len(b.ID) > chat.MaxButtonID {
				return nil, fmt.Errorf("telegram: button %q: id is %d bytes; Telegram's callback_data takes 1 to %d", b.Label, len(b.ID), chat.MaxButtonID)
			}
			if b.Label == "" {
				return nil, fmt.Errorf("telegram: button %q has no label", b.ID)
			}
			btn := models.InlineKeyboardButton{Text: b.Label, CallbackData: b.ID}
			switch b.Style {
			case chat.StylePrimary:
				btn.Style = "primary"
			case chat.StyleDanger:
				btn.Style = "danger"
			}
			r = append(r, btn)
		}
		if len(r) > 0 {
			kb = append(kb, r)
		}
	}
	if len(kb) == 0 {
		return nil, nil
	}
	return &models.InlineKeyboardMarkup{InlineKeyboard: kb}, nil
}

// sender makes the adapter's outbound messages: sends (split to fit),
// edits, deletes, typing, reactions, the command menu and drafts.
type sender struct {
	calls *caller
	chats *chats
	log   *slog.Logger

	draftSeq atomic.Int64 // the last draft id handed out
}

// send posts m, split to fit (see Adapter.Send).
func (s *sender) send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	chatID, thread, err := s.chats.target(conv)
	if err != nil {
		return chat.MsgRef{}, err
	}
	if m.Markdown == "" {
		return chat.MsgRef{}, errors.New("telegram: send: empty message")
	}
	markup, err := keyboard(m.Buttons)
	if err != nil {
		return chat.MsgRef{}, err
	}
	chunks := []string{m.Markdown}
	if chat.Len(chat.Render(m.Markdown, chat.DialectTelegram), chat.DialectTelegram) > maxLen {
		chunks = chat.Split(m.Markdown, chat.DialectTelegram, maxLen)
	}
	var ref chat.MsgRef
	for i, md := range chunks {
		var mk models.ReplyMarkup
		if i == len(chunks)-1 {
			mk = markup
		}
		reply := m.ReplyTo
		if i > 0 {
			reply = nil
		}
		msg, err := s.sendMessage(ctx, chatID, thread, md, mk, reply, m.Silent)
		var mig *bot.MigrateError
		if errors.As(err, &mig) {
			chatID = s.chats.migrate(chatID, int64(mig.MigrateToChatID))
			msg, err = s.sendMessage(ctx, chatID, thread, md, mk, reply, m.Silent)
		}
		if err != nil {
			return ref, err
		}
		ref = msgRef(conv, chatID, msg.ID)
	}
	return ref, nil
}

// sendMessage sends one chunk as HTML, falling back to plain text when
// Telegram cannot parse the HTML.
func (s *sender) sendMessage(ctx context.Context, chatID int64, thread int, md string, markup models.ReplyMarkup, reply *chat.MsgRef, silent bool) (*models.Message, error) {
	p := &bot.SendMessageParams{ChatID: chatID, MessageThreadID: thread, Text: chat.Render(md, chat.DialectTelegram),
		ParseMode: models.ParseModeHTML, ReplyMarkup: markup, DisableNotification: silent}
	if reply != nil {
		if id, err := msgID(*reply); err == nil {
			p.ReplyParameters = &models.ReplyParameters{MessageID: id, AllowSendingWithoutReply: true}
		}
	}
	var msg *models.Message
	call := func(ctx context.Context) (err error) {
		msg, err = s.calls.bot.SendMessage(ctx, p)
		return err
	}
	err := s.calls.do(ctx, modeSend, chatID, "send", call)
	if errors.Is(err, errEntities) {
		s.log.Warn("telegram: HTML rejected; sending plain text", "chat", chatID, "err", err)
		p.Text, p.ParseMode = chat.Render(md, chat.DialectPlain), ""
		err = s.calls.do(ctx, modeSend, chatID, "send", call)
	}
	return msg, err
}

// edit replaces a message's text and buttons (see Adapter.Edit).
func (s *sender) edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	chatID, id, err := s.chats.message(ref)
	if err != nil {
		return err
	}
	if m.Markdown == "" {
		return errors.New("telegram: edit: empty message")
	}
	markup, err := keyboard(m.Buttons)
	if err != nil {
		return err
	}
	p := &bot.EditMessageTextParams{ChatID: chatID, MessageID: id, Text: chat.Render(m.Markdown, chat.DialectTelegram),
		ParseMode: models.ParseModeHTML, ReplyMarkup: markup}
	call := func(ctx context.Context) error {
		_, err := s.calls.bot.EditMessageText(ctx, p)
		return err
	}
	err = s.calls.do(ctx, modeLive, chatID, "edit", call)
	if errors.Is(err, errEntities) {
		p.Text, p.ParseMode = chat.Render(m.Markdown, chat.DialectPlain), ""
		err = s.calls.do(ctx, modeLive, chatID, "edit", call)
	}
	return err
}

// delete deletes a message.
func (s *sender) delete(ctx context.Context, ref chat.MsgRef) error {
	chatID, id, err := s.chats.message(ref)
	if err != nil {
		return err
	}
	return s.calls.do(ctx, modeAdmin, chatID, "delete", func(ctx context.Context) error {
		_, err := s.calls.bot.DeleteMessage(ctx, &bot.DeleteMessageParams{ChatID: chatID, MessageID: id})
		return err
	})
}

// setStatus shows "typing…" (see Adapter.SetStatus).
func (s *sender) setStatus(ctx context.Context, conv chat.ConvRef, status string) error {
	if status == "" {
		return nil
	}
	chatID, thread, err := s.chats.target(conv)
	if err != nil {
		return err
	}
	return s.calls.do(ctx, modeStatus, chatID, "typing", func(ctx context.Context) error {
		_, err := s.calls.bot.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: chatID, MessageThreadID: thread, Action: models.ChatActionTyping})
		return err
	})
}

// react sets the bot's reaction on a message.
func (s *sender) react(ctx context.Context, ref chat.MsgRef, emoji string) error {
	chatID, id, err := s.chats.message(ref)
	if err != nil {
		return err
	}
	r := models.ReactionType{Type: models.ReactionTypeTypeEmoji, ReactionTypeEmoji: &models.ReactionTypeEmoji{Type: models.ReactionTypeTypeEmoji, Emoji: emoji}}
	return s.calls.do(ctx, modeAdmin, chatID, "react", func(ctx context.Context) error {
		_, err := s.calls.bot.SetMessageReaction(ctx, &bot.SetMessageReactionParams{ChatID: chatID, MessageID: id, Reaction: []models.ReactionType{r}})
		return err
	})
}

// registerCommands publishes the command menu (see
// Adapter.RegisterCommands).
func (s *sender) registerCommands(ctx context.Context, cmds []chat.CommandSpec) error {
	list := make([]models.BotCommand, 0, len(cmds))
	for _, c := range cmds {
		if !validCommand(c.Name) {
			return fmt.Errorf("telegram: register commands: %q: Telegram command names are 1-32 characters of a-z, 0-9 and _", c.Name)
		}
		if n := len([]rune(c.Description)); n < 1 || n > 256 {
			return fmt.Errorf("telegram: register commands: %q: the description must be 1-256 characters, not %d", c.Name, n)
		}
		list = append(list, models.BotCommand{Command: c.Name, Description: c.Description})
	}
	return s.calls.do(ctx, modeAdmin, 0, "register commands", func(ctx context.Context) error {
		_, err := s.calls.bot.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: list})
		return err
	})
}

func validCommand(s string) bool {
	if len(s) < 1 || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
