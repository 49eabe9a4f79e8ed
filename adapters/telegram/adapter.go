package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
)

// platform is this adapter's chat.Platform.
const platform chat.Platform = "telegram"

// maxLen is the longest rendered message in UTF-16 units, with headroom
// under Telegram's 4096.
const maxLen = 4000

// Platform returns "telegram".
func (a *Adapter) Platform() chat.Platform { return platform }

// Caps returns what the adapter can do in conv: drafts in private chats,
// edits every 1.5 s there and every 3 s in groups (their 20/min pace
// covers every bot message).
func (a *Adapter) Caps(conv chat.ConvRef) chat.Caps {
	c := chat.Caps{Dialect: chat.DialectTelegram, MaxLen: maxLen, EditInterval: 3 * time.Second, TypingRefresh: 4 * time.Second}
	if conv.DM {
		c.EditInterval = 1500 * time.Millisecond
		c.NativeStream = true
	}
	return c
}

// target resolves conv to a chat id (following a group's migration) and a
// forum topic id (0 for none).
func (a *Adapter) target(conv chat.ConvRef) (int64, int, error) {
	if conv.Platform != platform {
		return 0, 0, fmt.Errorf("telegram: conversation %s is not a Telegram one", conv.Key())
	}
	id, err := strconv.ParseInt(conv.Channel, 10, 64)
	if err != nil || id == 0 {
		return 0, 0, fmt.Errorf("telegram: conversation %s: chat id %q is not a number", conv.Key(), conv.Channel)
	}
	thread := 0
	if conv.Thread != "" {
		if thread, err = strconv.Atoi(conv.Thread); err != nil {
			return 0, 0, fmt.Errorf("telegram: conversation %s: topic id %q is not a number", conv.Key(), conv.Thread)
		}
	}
	a.mu.Lock()
	if to, ok := a.migrated[id]; ok {
		id = to
	}
	a.mu.Unlock()
	return id, thread, nil
}

func msgID(ref chat.MsgRef) (int, error) {
	id, err := strconv.Atoi(ref.ID)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("telegram: message id %q is not a number", ref.ID)
	}
	return id, nil
}

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

// Send posts m, split into several messages if its rendering is longer
// than Caps.MaxLen (buttons go on the last one, the reply on the first),
// and returns the last message. A group that became a supergroup is
// followed: the message goes to the new chat and the returned reference
// names it.
func (a *Adapter) Send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	chatID, thread, err := a.target(conv)
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
		msg, err := a.sendMessage(ctx, chatID, thread, md, mk, reply, m.Silent)
		var mig *bot.MigrateError
		if errors.As(err, &mig) {
			chatID = a.migrate(chatID, int64(mig.MigrateToChatID))
			msg, err = a.sendMessage(ctx, chatID, thread, md, mk, reply, m.Silent)
		}
		if err != nil {
			return ref, err
		}
		ref = a.ref(conv, chatID, msg.ID)
	}
	return ref, nil
}

// migrate records that chat from moved to to and returns to.
func (a *Adapter) migrate(from, to int64) int64 {
	a.mu.Lock()
	a.migrated[from] = to
	a.mu.Unlock()
	a.log.Info("telegram: group became a supergroup; following it", "from", from, "to", to)
	return to
}

func (a *Adapter) ref(conv chat.ConvRef, chatID int64, id int) chat.MsgRef {
	conv.Channel = strconv.FormatInt(chatID, 10)
	return chat.MsgRef{Conv: conv, ID: strconv.Itoa(id)}
}

// sendMessage sends one chunk as HTML, falling back to plain text when
// Telegram cannot parse the HTML.
func (a *Adapter) sendMessage(ctx context.Context, chatID int64, thread int, md string, markup models.ReplyMarkup, reply *chat.MsgRef, silent bool) (*models.Message, error) {
	p := &bot.SendMessageParams{ChatID: chatID, MessageThreadID: thread, Text: chat.Render(md, chat.DialectTelegram),
		ParseMode: models.ParseModeHTML, ReplyMarkup: markup, DisableNotification: silent}
	if reply != nil {
		if id, err := msgID(*reply); err == nil {
			p.ReplyParameters = &models.ReplyParameters{MessageID: id, AllowSendingWithoutReply: true}
		}
	}
	var msg *models.Message
	call := func(ctx context.Context) (err error) {
		msg, err = a.bot.SendMessage(ctx, p)
		return err
	}
	err := a.do(ctx, modeSend, chatID, "send", call)
	if errors.Is(err, errEntities) {
		a.log.Warn("telegram: HTML rejected; sending plain text", "chat", chatID, "err", err)
		p.Text, p.ParseMode = chat.Render(md, chat.DialectPlain), ""
		err = a.do(ctx, modeSend, chatID, "send", call)
	}
	return msg, err
}

// Edit replaces a message's text and buttons (no buttons removes the
// keyboard). "Not modified" is success; a vanished message is
// chat.ErrNotFound; a bot-wide retry_after pause or a chat over its
// pace is a *chat.RateLimitError (edits never wait it out).
func (a *Adapter) Edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	chatID, _, err := a.target(ref.Conv)
	if err != nil {
		return err
	}
	id, err := msgID(ref)
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
		_, err := a.bot.EditMessageText(ctx, p)
		return err
	}
	err = a.do(ctx, modeLive, chatID, "edit", call)
	if errors.Is(err, errEntities) {
		p.Text, p.ParseMode = chat.Render(m.Markdown, chat.DialectPlain), ""
		err = a.do(ctx, modeLive, chatID, "edit", call)
	}
	return err
}

// Delete deletes a message.
func (a *Adapter) Delete(ctx context.Context, ref chat.MsgRef) error {
	chatID, _, err := a.target(ref.Conv)
	if err != nil {
		return err
	}
	id, err := msgID(ref)
	if err != nil {
		return err
	}
	return a.do(ctx, modeAdmin, chatID, "delete", func(ctx context.Context) error {
		_, err := a.bot.DeleteMessage(ctx, &bot.DeleteMessageParams{ChatID: chatID, MessageID: id})
		return err
	})
}

// SetStatus shows "typing…" for about 5 s (refresh every
// Caps.TypingRefresh); Telegram cannot clear it, so "" does nothing.
func (a *Adapter) SetStatus(ctx context.Context, conv chat.ConvRef, status string) error {
	if status == "" {
		return nil
	}
	chatID, thread, err := a.target(conv)
	if err != nil {
		return err
	}
	return a.do(ctx, modeStatus, chatID, "typing", func(ctx context.Context) error {
		_, err := a.bot.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: chatID, MessageThreadID: thread, Action: models.ChatActionTyping})
		return err
	})
}

// React sets the bot's reaction on a message (Telegram allows a fixed set
// of emoji).
func (a *Adapter) React(ctx context.Context, ref chat.MsgRef, emoji string) error {
	chatID, _, err := a.target(ref.Conv)
	if err != nil {
		return err
	}
	id, err := msgID(ref)
	if err != nil {
		return err
	}
	r := models.ReactionType{Type: models.ReactionTypeTypeEmoji, ReactionTypeEmoji: &models.ReactionTypeEmoji{Type: models.ReactionTypeTypeEmoji, Emoji: emoji}}
	return a.do(ctx, modeAdmin, chatID, "react", func(ctx context.Context) error {
		_, err := a.bot.SetMessageReaction(ctx, &bot.SetMessageReactionParams{ChatID: chatID, MessageID: id, Reaction: []models.ReactionType{r}})
		return err
	})
}

// RegisterCommands publishes the command menu with setMyCommands. Names
// must be 1-32 characters of a-z, 0-9 and _; descriptions 1-256.
func (a *Adapter) RegisterCommands(ctx context.Context, cmds []chat.CommandSpec) error {
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
	return a.do(ctx, modeAdmin, 0, "register commands", func(ctx context.Context) error {
		_, err := a.bot.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: list})
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
