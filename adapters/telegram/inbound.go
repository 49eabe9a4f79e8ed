package telegram

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
)

// reader turns Bot API updates into chat.Inbound events. It knows the
// bot's own identity (to drop its own messages and strip mentions of it)
// and records group migrations in chats.
type reader struct {
	chats *chats

	mu sync.Mutex
	me identity
}

// identity is the bot's own user.
type identity struct {
	id       int64
	username string
}

// inbound normalises an update; false means the update carries nothing for
// the gateway (it is still confirmed).
func (d *reader) inbound(u *models.Update) (chat.Inbound, bool) {
	me := d.identity()
	dedup := "telegram:" + strconv.FormatInt(me.id, 10) + ":" + strconv.FormatInt(u.ID, 10)
	switch {
	case u.Message != nil:
		in, ok := d.message(u.Message, me)
		in.DedupKey = dedup
		return in, ok
	case u.CallbackQuery != nil:
		in, ok := callback(u.CallbackQuery)
		in.DedupKey = dedup
		return in, ok
	}
	return chat.Inbound{}, false
}

// identity returns the bot's own user as last learnt (only its id before
// getMe).
func (d *reader) identity() identity {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.me
}

// learnt records the bot's own user (from getMe).
func (d *reader) learnt(me identity) {
	d.mu.Lock()
	d.me = me
	d.mu.Unlock()
}

// feed hands one update to sink; nil means it may be confirmed.
func (d *reader) feed(ctx context.Context, sink chat.Sink, u *models.Update) error {
	in, ok := d.inbound(u)
	if !ok {
		return nil
	}
	return sink(ctx, in)
}

// conv returns the location of a message: its chat, and its forum topic
// when it is a topic message (the only case where message_thread_id must be
// echoed).
func conv(m *models.Message) chat.ConvRef {
	c := chat.ConvRef{Platform: platform, Channel: strconv.FormatInt(m.Chat.ID, 10), DM: m.Chat.Type == models.ChatTypePrivate}
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		c.Thread = strconv.Itoa(m.MessageThreadID)
	}
	return c
}

func user(u *models.User) chat.User {
	if u == nil {
		return chat.User{}
	}
	name := u.Username
	if name == "" {
		name = strings.TrimSpace(u.FirstName + " " + u.LastName)
	}
	return chat.User{ID: strconv.FormatInt(u.ID, 10), Name: name, IsBot: u.IsBot}
}

func (d *reader) message(m *models.Message, me identity) (chat.Inbound, bool) {
	c := conv(m)
	in := chat.Inbound{
		Kind: chat.KindMessage,
		Conv: c,
		Msg:  chat.MsgRef{Conv: c, ID: strconv.Itoa(m.ID)},
		User: user(m.From),
		Time: time.Unix(int64(m.Date), 0),
	}
	if mv, ok := d.moved(m); ok {
		in.Kind, in.Moved, in.Conv = chat.KindMoved, mv, mv.From
		in.Msg.Conv = mv.From
		return in, true
	}
	if m.From != nil && m.From.ID == me.id {
		return in, false
	}
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	in.Files = files(m)
	if text == "" && len(in.Files) == 0 {
		return in, false // service messages, stickers, polls…
	}
	// In a forum topic every message replies to the topic's first message;
	// that is no reply of the user's.
	if r := m.ReplyToMessage; r != nil && !(m.IsTopicMessage && r.ID == m.MessageThreadID) {
		ref := chat.MsgRef{Conv: c, ID: strconv.Itoa(r.ID)}
		in.ReplyTo = &ref
		in.ReplyToBot = r.From != nil && r.From.ID == me.id
	}
	text, mentioned := stripMention(text, me.username)
	in.Command = chat.ParseCommand(text, me.username)
	if in.Command == nil && strings.HasPrefix(text, "/") && chat.ParseCommand(text, "") != nil {
		// "/cmd@otherbot": a command for another bot.
		return in, false
	}
	in.Text = text
	in.Mentioned = c.DM || mentioned || in.ReplyToBot
	return in, true
}

// moved reports a group that became a supergroup. Telegram posts two
// service messages: migrate_to_chat_id in the old group and
// migrate_from_chat_id in the new supergroup; either one yields the same
// move (the gateway applies it once). Only these fields, which only
// Telegram sets, produce a chat.KindMoved event.
func (d *reader) moved(m *models.Message) (*chat.Move, bool) {
	var from, to int64
	switch {
	case m.MigrateToChatID != 0:
		from, to = m.Chat.ID, m.MigrateToChatID
	case m.MigrateFromChatID != 0:
		from, to = m.MigrateFromChatID, m.Chat.ID
	default:
		return nil, false
	}
	if from == to || from == 0 || m.Chat.Type == models.ChatTypePrivate {
		return nil, false
	}
	d.chats.migrate(from, to)
	group := func(id int64) chat.ConvRef {
		return chat.ConvRef{Platform: platform, Channel: strconv.FormatInt(id, 10)}
	}
	return &chat.Move{From: group(from), To: group(to)}, true
}

// stripMention removes every "@username" (case-insensitive, not followed by
// a name character) from text; it reports whether there was one. A command
// addressed as "/cmd@username" counts as a mention.
func stripMention(text, username string) (string, bool) {
	if username == "" {
		return text, false
	}
	at := "@" + strings.ToLower(username)
	lower := strings.ToLower(text)
	var b strings.Builder
	found := false
	for i := 0; i < len(text); {
		j := strings.Index(lower[i:], at)
		if j < 0 {
			b.WriteString(text[i:])
			break
		}
		end := i + j + len(at)
		if end < len(text) && isNameByte(text[end]) {
			b.WriteString(text[i:end])
			i = end
			continue
		}
		b.WriteString(text[i : i+j])
		found = true
		i = end
		// "hi @bot there" → "hi there"; "@bot hi" → "hi".
		if atStart := i-len(at) == 0 || text[i-len(at)-1] == ' ' || text[i-len(at)-1] == '\n'; atStart && i < len(text) && text[i] == ' ' {
			i++
		}
	}
	if !found {
		return text, false
	}
	return strings.TrimSpace(b.String()), true
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// files lists the attachments of a message; of a photo's sizes the
// largest.
func files(m *models.Message) []chat.FileRef {
	var out []chat.FileRef
	if n := len(m.Photo); n > 0 {
		p := m.Photo[n-1]
		out = append(out, chat.FileRef{ID: p.FileID, Name: "photo.jpg", MimeType: "image/jpeg", Size: int64(p.FileSize), Kind: "photo"})
	}
	if d := m.Document; d != nil {
		out = append(out, chat.FileRef{ID: d.FileID, Name: d.FileName, MimeType: d.MimeType, Size: d.FileSize, Kind: "document"})
	}
	if v := m.Voice; v != nil {
		out = append(out, chat.FileRef{ID: v.FileID, Name: "voice.ogg", MimeType: v.MimeType, Size: v.FileSize, Kind: "voice"})
	}
	if v := m.Audio; v != nil {
		out = append(out, chat.FileRef{ID: v.FileID, Name: v.FileName, MimeType: v.MimeType, Size: v.FileSize, Kind: "audio"})
	}
	if v := m.Video; v != nil {
		out = append(out, chat.FileRef{ID: v.FileID, Name: v.FileName, MimeType: v.MimeType, Size: v.FileSize, Kind: "video"})
	}
	return out
}

// callback normalises a button press.
func callback(q *models.CallbackQuery) (chat.Inbound, bool) {
	var c chat.ConvRef
	var id int
	switch {
	case q.Message.Message != nil:
		c, id = conv(q.Message.Message), q.Message.Message.ID
	case q.Message.InaccessibleMessage != nil:
		im := q.Message.InaccessibleMessage
		c = chat.ConvRef{Platform: platform, Channel: strconv.FormatInt(im.Chat.ID, 10), DM: im.Chat.Type == models.ChatTypePrivate}
		id = im.MessageID
	default:
		return chat.Inbound{}, false // an inline-mode message: not ours
	}
	msg := chat.MsgRef{Conv: c, ID: strconv.Itoa(id)}
	now := time.Now()
	u := user(&q.From)
	return chat.Inbound{
		Kind:      chat.KindAction,
		Conv:      c,
		Msg:       msg,
		User:      u,
		Mentioned: true,
		Action:    &chat.Action{Data: q.Data, Msg: msg},
		Interaction: &chat.Interaction{Platform: platform, ID: q.ID, Conv: c, Msg: msg, User: u.ID,
			Deadline: now.Add(callbackDeadline)},
		Time: now,
	}, true
}
