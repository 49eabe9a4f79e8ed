package telegramtest

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/go-telegram/bot/models"
)

// Message is a message the bot posted, as the user would now see it.
type Message struct {
	ID       int
	ChatID   int64
	ThreadID int
	// Text is the visible text (tags stripped, entities decoded), or the
	// caption of a file.
	Text      string
	Raw       string // text as sent
	ParseMode string
	Buttons   [][]models.InlineKeyboardButton
	ReplyTo   int
	Kind      string // "text", "photo" or "document"
	FileName  string
	File      []byte
	Edits     int
	Reactions []string
	deleted   bool
	markup    string
}

// Messages returns the bot's visible messages in a chat, oldest first.
func (s *Server) Messages(chatID int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.msgs[chatID] {
		if !m.deleted {
			c := *m
			c.Buttons = append([][]models.InlineKeyboardButton(nil), m.Buttons...)
			out = append(out, c)
		}
	}
	return out
}

const notModified = "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"

func badRequest(desc string) *apiError { return &apiError{code: 400, desc: "Bad Request: " + desc} }

// dispatch answers one call; s.mu is held.
func (s *Server) dispatch(c Call) (any, *apiError) {
	p := c.Params
	chatID, hasChat := int64(0), false
	if v, ok := p["chat_id"]; ok {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, badRequest("chat not found")
		}
		chatID, hasChat = id, true
		if to, ok := s.migrated[chatID]; ok {
			return nil, &apiError{code: 400, desc: "Bad Request: group chat was upgraded to a supergroup chat", migrateTo: to}
		}
		if e := s.checkRate(c.Method, chatID); e != nil {
			return nil, e
		}
	}
	switch c.Method {
	case "getMe":
		return s.Bot, nil
	case "sendMessage":
		return s.sendMessage(chatID, p)
	case "editMessageText", "editMessageReplyMarkup":
		return s.edit(c.Method, chatID, p)
	case "sendMessageDraft":
		if chatID <= 0 {
			return nil, badRequest("sendMessageDraft can be used only in private chats")
		}
		if id, _ := strconv.ParseInt(p["draft_id"], 10, 64); id == 0 {
			return nil, badRequest("draft_id must be a non-zero integer")
		}
		text := p["text"]
		if p["parse_mode"] == "HTML" {
			vis, err := parseHTML(text)
			if err != nil {
				return nil, badRequest("can't parse entities: " + err.Error())
			}
			text = vis
		}
		if utf16Len(text) > 4096 {
			return nil, badRequest("text is too long")
		}
		s.drafts[chatID] = append(s.drafts[chatID], text)
		return true, nil
	case "sendChatAction":
		if !hasChat || p["action"] == "" {
			return nil, badRequest("chat_id and action are required")
		}
		return true, nil
	case "answerCallbackQuery":
		if p["callback_query_id"] == "" {
			return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
		}
		return true, nil
	case "setMyCommands":
		var cmds []models.BotCommand
		if err := json.Unmarshal([]byte(p["commands"]), &cmds); err != nil {
			return nil, badRequest("can't parse commands JSON")
		}
		s.commands = cmds
		return true, nil
	case "setWebhook":
		s.webhookURL, s.webhookSec = p["url"], p["secret_token"]
		close(s.notify) // wakes the webhook delivery
		s.notify = make(chan struct{})
		return true, nil
	case "deleteWebhook":
		s.webhookURL, s.webhookSec = "", ""
		return true, nil
	case "getFile":
		f, ok := s.files[p["file_id"]]
		if !ok {
			return nil, badRequest("invalid file_id")
		}
		if f.size > 20<<20 {
			return nil, badRequest("file is too big")
		}
		return models.File{FileID: p["file_id"], FileUniqueID: "u" + p["file_id"], FileSize: f.size, FilePath: f.path}, nil
	case "sendDocument", "sendPhoto":
		field, kind := "document", "document"
		if c.Method == "sendPhoto" {
			field, kind = "photo", "photo"
		}
		data, ok := c.Files[field]
		if !ok {
			return nil, badRequest("there is no " + field + " in the request")
		}
		m := s.newMessage(chatID, p)
		m.Kind, m.Text, m.Raw, m.File = kind, p["caption"], p["caption"], data
		m.FileName = p[field][len("file:"):]
		return s.wire(m), nil
	case "deleteMessage":
		m := s.find(chatID, p["message_id"])
		if m == nil {
			return nil, badRequest("message to delete not found")
		}
		m.deleted = true
		return true, nil
	case "setMessageReaction":
		var rs []struct {
			Emoji string `json:"emoji"`
		}
		_ = json.Unmarshal([]byte(p["reaction"]), &rs)
		m := s.find(chatID, p["message_id"])
		if m == nil {
			return nil, badRequest("message to react not found")
		}
		for _, r := range rs {
			m.Reactions = append(m.Reactions, r.Emoji)
		}
		return true, nil
	}
	return nil, &apiError{code: 404, desc: "Not Found: method not found"}
}

func (s *Server) sendMessage(chatID int64, p map[string]string) (any, *apiError) {
	vis, e := checkText(p)
	if e != nil {
		return nil, e
	}
	m := s.newMessage(chatID, p)
	m.Kind, m.Text, m.Raw, m.ParseMode = "text", vis, p["text"], p["parse_mode"]
	m.markup = p["reply_markup"]
	m.Buttons = parseMarkup(p["reply_markup"])
	return s.wire(m), nil
}

func (s *Server) edit(method string, chatID int64, p map[string]string) (any, *apiError) {
	m := s.find(chatID, p["message_id"])
	if m == nil {
		return nil, badRequest("message to edit not found")
	}
	if method == "editMessageReplyMarkup" {
		if p["reply_markup"] == m.markup {
			return nil, &apiError{code: 400, desc: notModified}
		}
		m.markup, m.Buttons = p["reply_markup"], parseMarkup(p["reply_markup"])
		m.Edits++
		return s.wire(m), nil
	}
	vis, e := checkText(p)
	if e != nil {
		return nil, e
	}
	if p["text"] == m.Raw && p["parse_mode"] == m.ParseMode && p["reply_markup"] == m.markup {
		return nil, &apiError{code: 400, desc: notModified}
	}
	m.Text, m.Raw, m.ParseMode = vis, p["text"], p["parse_mode"]
	m.markup, m.Buttons = p["reply_markup"], parseMarkup(p["reply_markup"])
	m.Edits++
	return s.wire(m), nil
}

func checkText(p map[string]string) (string, *apiError) {
	text := p["text"]
	if p["parse_mode"] == "HTML" {
		vis, err := parseHTML(text)
		if err != nil {
			return "", badRequest("can't parse entities: " + err.Error())
		}
		text = vis
	}
	if text == "" {
		return "", badRequest("message text is empty")
	}
	if utf16Len(text) > 4096 {
		return "", badRequest("message is too long")
	}
	return text, nil
}

func parseMarkup(raw string) [][]models.InlineKeyboardButton {
	if raw == "" {
		return nil
	}
	var mk models.InlineKeyboardMarkup
	if json.Unmarshal([]byte(raw), &mk) != nil {
		return nil
	}
	return mk.InlineKeyboard
}

func (s *Server) newMessage(chatID int64, p map[string]string) *Message {
	s.nextMsg[chatID]++
	m := &Message{ID: s.nextMsg[chatID], ChatID: chatID}
	m.ThreadID, _ = strconv.Atoi(p["message_thread_id"])
	if rp := p["reply_parameters"]; rp != "" {
		var r models.ReplyParameters
		if json.Unmarshal([]byte(rp), &r) == nil {
			m.ReplyTo = r.MessageID
		}
	}
	s.msgs[chatID] = append(s.msgs[chatID], m)
	return m
}

func (s *Server) find(chatID int64, id string) *Message {
	n, _ := strconv.Atoi(id)
	for _, m := range s.msgs[chatID] {
		if m.ID == n && !m.deleted {
			return m
		}
	}
	return nil
}

// chat returns the chat with id, inventing a private chat, a group or a
// supergroup from the id's sign and size when it was never added.
func (s *Server) chat(id int64) models.Chat {
	if c, ok := s.chats[id]; ok {
		return c
	}
	switch {
	case id > 0:
		return models.Chat{ID: id, Type: models.ChatTypePrivate, FirstName: "user"}
	case id <= -1000000000000:
		return models.Chat{ID: id, Type: models.ChatTypeSupergroup, Title: "supergroup"}
	}
	return models.Chat{ID: id, Type: models.ChatTypeGroup, Title: "group"}
}

// wire returns the Bot API form of a bot message.
func (s *Server) wire(m *Message) *models.Message {
	c := s.chat(m.ChatID)
	bot := s.Bot
	w := &models.Message{ID: m.ID, From: &bot, Chat: c, Date: int(time.Now().Unix()), Text: m.Text, MessageThreadID: m.ThreadID}
	w.IsTopicMessage = c.IsForum && m.ThreadID != 0
	if m.Kind != "text" {
		w.Text, w.Caption = "", m.Text
	}
	if len(m.Buttons) > 0 {
		w.ReplyMarkup = &models.InlineKeyboardMarkup{InlineKeyboard: m.Buttons}
	}
	return w
}
