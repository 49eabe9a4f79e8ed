package telegram

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
)

// draftInterval is the shortest time between two drafts of one stream.
const draftInterval = time.Second

// openStream starts a draft stream in a private chat (see
// Adapter.OpenStream).
func (s *sender) openStream(ctx context.Context, conv chat.ConvRef, opts chat.StreamOptions) (chat.Stream, error) {
	replyTo := opts.ReplyTo
	chatID, thread, err := s.chats.target(conv)
	if err != nil {
		return nil, err
	}
	if chatID <= 0 || !conv.DM {
		return nil, errors.New("telegram: drafts work in private chats only; stream by edits in " + conv.Key())
	}
	return &draftStream{out: s, conv: conv, chatID: chatID, thread: thread, replyTo: replyTo, id: s.draftSeq.Add(1)}, nil
}

// draftStream is one reply streamed as a Telegram draft.
type draftStream struct {
	out     *sender
	conv    chat.ConvRef
	chatID  int64
	thread  int
	replyTo *chat.MsgRef
	id      int64

	mu   sync.Mutex
	last time.Time
	done bool
}

var errStreamDone = errors.New("telegram: stream already finished")

// Update shows markdown as the draft. Updates closer than draftInterval to
// the previous one are skipped (latest wins: Finish sends the full text).
// A text longer than one message shows its last part.
func (s *draftStream) Update(ctx context.Context, markdown string) error {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return errStreamDone
	}
	if time.Since(s.last) < draftInterval {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if chat.Len(chat.Render(markdown, chat.DialectTelegram), chat.DialectTelegram) > maxLen {
		if parts := chat.Split(markdown, chat.DialectTelegram, maxLen); len(parts) > 0 {
			markdown = parts[len(parts)-1]
		}
	}
	p := &bot.SendMessageDraftParams{ChatID: s.chatID, MessageThreadID: s.thread, DraftID: strconv.FormatInt(s.id, 10),
		Text: chat.Render(markdown, chat.DialectTelegram), ParseMode: models.ParseModeHTML}
	call := func(ctx context.Context) error {
		_, err := s.out.calls.bot.SendMessageDraft(ctx, p)
		return err
	}
	err := s.out.calls.do(ctx, modeLive, s.chatID, "draft", call)
	if errors.Is(err, errEntities) {
		p.Text, p.ParseMode = chat.Render(markdown, chat.DialectPlain), ""
		err = s.out.calls.do(ctx, modeLive, s.chatID, "draft", call)
	}
	if err == nil {
		s.mu.Lock()
		s.last = time.Now()
		s.mu.Unlock()
	}
	return err
}

// Finish sends the final message (split if needed; it replies to the
// stream's replyTo unless final names another) and ends the stream.
func (s *draftStream) Finish(ctx context.Context, final chat.Out) (chat.MsgRef, error) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return chat.MsgRef{}, errStreamDone
	}
	s.done = true
	s.mu.Unlock()
	if final.ReplyTo == nil {
		final.ReplyTo = s.replyTo
	}
	return s.out.send(ctx, s.conv, final)
}

// Abort ends the stream; the draft fades on the user's side by itself.
func (s *draftStream) Abort(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	return nil
}
