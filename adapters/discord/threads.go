package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/chat"
)

// threadArchive is the auto_archive_duration of threads pibot opens, in
// minutes (one of 60, 1440, 4320, 10080).
const threadArchive = 1440

// OpenThread opens a public thread on a channel message; its id is the
// message's id, so the conversation is msg.Conv with Thread = msg.ID.
// Opening it again returns the same conversation. The name is cut to 1-100
// characters. DMs and threads have no threads of their own.
func (a *Adapter) OpenThread(ctx context.Context, msg chat.MsgRef, name string) (chat.ConvRef, error) {
	conv := msg.Conv
	if conv.Platform != platform || conv.DM || conv.Thread != "" {
		return chat.ConvRef{}, fmt.Errorf("discord: open thread: %s is not a guild channel's main line", conv.Key())
	}
	ch, err := channelOf(conv)
	if err != nil {
		return chat.ConvRef{}, err
	}
	id, err := messageID(msg)
	if err != nil {
		return chat.ConvRef{}, err
	}
	ts := &discordgo.ThreadStart{Name: threadName(name), AutoArchiveDuration: threadArchive, Type: discordgo.ChannelTypeGuildPublicThread}
	err = a.calls.do(ctx, modeSend, chanRoute(ch, "threads"), "open thread", func(opts ...discordgo.RequestOption) error {
		_, err := a.calls.s.MessageThreadStartComplex(ch, id, ts, opts...)
		return err
	})
	if err != nil && !isThreadExists(err) {
		return chat.ConvRef{}, err
	}
	a.in.markThread(id)
	conv.Thread = id
	return conv, nil
}

func isThreadExists(err error) bool {
	var e *apiError
	return errors.As(err, &e) && e.code == codeThreadExists
}

// threadName makes a thread title of 1-100 characters on one line.
func threadName(s string) string {
	s = strings.Join(strings.Fields(chat.Render(s, chat.DialectPlain)), " ")
	if r := []rune(s); len(r) > 100 {
		s = string(r[:99]) + "…"
	}
	if s == "" {
		s = "pibot"
	}
	return s
}
