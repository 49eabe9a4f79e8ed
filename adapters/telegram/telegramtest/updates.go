package telegramtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/go-telegram/bot/models"
)

// AddChat registers a chat (type, title, is_forum) for later messages.
func (s *Server) AddChat(c models.Chat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chats[c.ID] = c
}

// UserMessage builds a message from a user in a chat with the chat's next
// message id. It is not delivered until passed to AddMessage.
func (s *Server) UserMessage(chatID int64, from models.User, text string) *models.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextMsg[chatID]++
	f := from
	return &models.Message{ID: s.nextMsg[chatID], From: &f, Chat: s.chat(chatID), Date: int(time.Now().Unix()), Text: text}
}

// BotMessage returns the Bot API form of a message the bot posted, for use
// as reply_to_message; nil if there is none with that id.
func (s *Server) BotMessage(chatID int64, id int) *models.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.find(chatID, strconv.Itoa(id))
	if m == nil {
		return nil
	}
	return s.wire(m)
}

// AddMessage queues a message update and returns its update_id.
func (s *Server) AddMessage(m *models.Message) int64 {
	return s.AddUpdate(models.Update{Message: m})
}

// AddText queues a text message from a user and returns it.
func (s *Server) AddText(chatID int64, from models.User, text string) *models.Message {
	m := s.UserMessage(chatID, from, text)
	s.AddMessage(m)
	return m
}

// AddCallback queues a button press on the bot's message msgID and returns
// the callback query id.
func (s *Server) AddCallback(from models.User, chatID int64, msgID int, data string) string {
	s.mu.Lock()
	s.nextQuery++
	id := "q" + strconv.Itoa(s.nextQuery)
	var mim models.MaybeInaccessibleMessage
	if m := s.find(chatID, strconv.Itoa(msgID)); m != nil {
		mim = models.MaybeInaccessibleMessage{Type: models.MaybeInaccessibleMessageTypeMessage, Message: s.wire(m)}
	} else {
		mim = models.MaybeInaccessibleMessage{Type: models.MaybeInaccessibleMessageTypeInaccessibleMessage,
			InaccessibleMessage: &models.InaccessibleMessage{Chat: s.chat(chatID), MessageID: msgID}}
	}
	s.mu.Unlock()
	s.AddUpdate(models.Update{CallbackQuery: &models.CallbackQuery{ID: id, From: from, Message: mim, ChatInstance: "ci", Data: data}})
	return id
}

// AddUpdate queues an update, assigning its update_id, and returns the id.
func (s *Server) AddUpdate(u models.Update) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextUpdate++
	u.ID = s.nextUpdate
	raw, err := json.Marshal(u)
	if err != nil {
		panic("telegramtest: marshal update: " + err.Error())
	}
	s.updates = append(s.updates, raw)
	s.updateIDs = append(s.updateIDs, u.ID)
	close(s.notify)
	s.notify = make(chan struct{})
	return u.ID
}

// Pending returns how many updates were not yet confirmed by a getUpdates
// offset.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.updates)
}

const conflictPoll = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"

// getUpdates serves long polling: confirm updates below offset, answer the
// rest at once or hold the request until one arrives or timeout ends. A new
// poll ends one in flight with 409.
func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, call Call) {
	defer s.pollStarted()()
	s.mu.Lock()
	if s.conflict {
		s.mu.Unlock()
		s.answer(w, call, nil, &apiError{code: 409, desc: conflictPoll})
		return
	}
	if s.webhookURL != "" {
		s.mu.Unlock()
		s.answer(w, call, nil, &apiError{code: 409, desc: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"})
		return
	}
	if s.pollStop != nil {
		close(s.pollStop)
	}
	stop := make(chan struct{})
	s.pollStop = stop
	offset, _ := strconv.ParseInt(call.Params["offset"], 10, 64)
	limit, _ := strconv.Atoi(call.Params["limit"])
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, _ := strconv.Atoi(call.Params["timeout"])
	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	for {
		for len(s.updateIDs) > 0 && s.updateIDs[0] < offset {
			s.updateIDs, s.updates = s.updateIDs[1:], s.updates[1:]
		}
		if n := min(len(s.updates), limit); n > 0 || timeout == 0 {
			batch := append([]json.RawMessage{}, s.updates[:n]...)
			s.endPoll(stop)
			s.mu.Unlock()
			s.answer(w, call, batch, nil)
			return
		}
		notify := s.notify
		s.mu.Unlock()
		select {
		case <-notify:
			s.mu.Lock()
		case <-stop:
			s.answer(w, call, nil, &apiError{code: 409, desc: conflictPoll})
			return
		case <-deadline.C:
			s.mu.Lock()
			timeout = 0
		case <-r.Context().Done():
			s.mu.Lock()
			s.endPoll(stop)
			s.mu.Unlock()
			return
		}
	}
}

func (s *Server) endPoll(stop chan struct{}) {
	if s.pollStop == stop {
		s.pollStop = nil
	}
}
