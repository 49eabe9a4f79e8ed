package telegram

import (
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/pibot/pibot/chat"
)

// chats resolves conversations to Telegram chat ids and remembers the
// groups that became supergroups, so that calls to the old id go to the
// new one.
type chats struct {
	log *slog.Logger

	mu       sync.Mutex
	migrated map[int64]int64
}

func newChats(log *slog.Logger) *chats {
	return &chats{log: log, migrated: map[int64]int64{}}
}

// target resolves conv to a chat id (following a group's migration) and a
// forum topic id (0 for none).
func (c *chats) target(conv chat.ConvRef) (int64, int, error) {
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
	c.mu.Lock()
	if to, ok := c.migrated[id]; ok {
		id = to
	}
	c.mu.Unlock()
	return id, thread, nil
}

// migrate records that chat from moved to to and returns to.
func (c *chats) migrate(from, to int64) int64 {
	c.mu.Lock()
	c.migrated[from] = to
	c.mu.Unlock()
	c.log.Info("telegram: group became a supergroup; following it", "from", from, "to", to)
	return to
}

// message resolves a message reference to its chat id and message id.
func (c *chats) message(ref chat.MsgRef) (chatID int64, id int, err error) {
	if chatID, _, err = c.target(ref.Conv); err != nil {
		return 0, 0, err
	}
	if id, err = msgID(ref); err != nil {
		return 0, 0, err
	}
	return chatID, id, nil
}

func msgID(ref chat.MsgRef) (int, error) {
	id, err := strconv.Atoi(ref.ID)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("telegram: message id %q is not a number", ref.ID)
	}
	return id, nil
}

// msgRef names message id in chatID, in conv (whose chat id it replaces:
// the chat may have migrated).
func msgRef(conv chat.ConvRef, chatID int64, id int) chat.MsgRef {
	conv.Channel = strconv.FormatInt(chatID, 10)
	return chat.MsgRef{Conv: conv, ID: strconv.Itoa(id)}
}
