package discord

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/chat"
)

// channelInfo is what the adapter needs to know of a channel to place a
// message: whether it is a thread, its parent, who started it.
type channelInfo struct {
	thread bool
	parent string
	owner  string
	// starterBot: the thread hangs off one of the bot's messages (its id
	// is that message's id), so the conversation branches from it.
	starterBot bool
}

// reader turns gateway events into chat.Inbound: it places messages
// (channel lookups, cached), knows the bot's id and the threads it is in.
type reader struct {
	calls   *caller
	log     *slog.Logger
	command string        // the application command's name
	app     func() string // the application id, if known

	mu       sync.Mutex
	me       string // the bot's user id, from READY
	channels map[string]channelInfo
	threads  map[string]bool // threads the bot opened
}

// setMe records the bot's user id.
func (rd *reader) setMe(id string) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.me = id
}

// markThread records a thread the bot opened.
func (rd *reader) markThread(id string) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.threads[id] = true
}

// maxChannels bounds the channel cache.
const maxChannels = 8192

// channel looks a channel up (GET /channels/{id}), cached.
func (rd *reader) channel(ctx context.Context, id string) (channelInfo, error) {
	rd.mu.Lock()
	ci, ok := rd.channels[id]
	rd.mu.Unlock()
	if ok {
		return ci, nil
	}
	var c *discordgo.Channel
	err := rd.calls.do(ctx, modeSend, "channels/"+id, "get channel", func(opts ...discordgo.RequestOption) (err error) {
		c, err = rd.calls.s.Channel(id, opts...)
		return err
	})
	if err != nil {
		return channelInfo{}, err
	}
	ci = channelInfo{thread: c.IsThread(), parent: c.ParentID, owner: c.OwnerID}
	if me := rd.identity(); ci.thread && ci.parent != "" && me != "" && ci.owner != me {
		ci.starterBot = rd.botStarter(ctx, ci.parent, id, me)
	}
	rd.mu.Lock()
	if len(rd.channels) >= maxChannels {
		clear(rd.channels)
	}
	rd.channels[id] = ci
	rd.mu.Unlock()
	return ci, nil
}

// botStarter reports whether message id of channel parent is the bot's:
// a thread started on it has the same id.
func (rd *reader) botStarter(ctx context.Context, parent, id, me string) bool {
	var m *discordgo.Message
	err := rd.calls.do(ctx, modeSend, chanRoute(parent, "messages"), "get starter message", func(opts ...discordgo.RequestOption) (err error) {
		m, err = rd.calls.s.ChannelMessage(parent, id, opts...)
		return err
	})
	return err == nil && m != nil && m.Author != nil && m.Author.ID == me
}

// conv places a message of channel id (guild "" for a DM): a thread's
// conversation is its parent channel with Thread = the thread's id (for a
// thread started from a message, that message's id).
func (rd *reader) conv(ctx context.Context, guild, id string) (chat.ConvRef, channelInfo, error) {
	if guild == "" {
		return chat.ConvRef{Platform: platform, Channel: id, DM: true}, channelInfo{}, nil
	}
	ci, err := rd.channel(ctx, id)
	if err != nil {
		return chat.ConvRef{}, ci, err
	}
	if ci.thread && ci.parent != "" {
		return chat.ConvRef{Platform: platform, Workspace: guild, Channel: ci.parent, Thread: id}, ci, nil
	}
	return chat.ConvRef{Platform: platform, Workspace: guild, Channel: id}, ci, nil
}

func (rd *reader) identity() string {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.me
}

func user(u *discordgo.User) chat.User {
	if u == nil {
		return chat.User{}
	}
	name := u.GlobalName
	if name == "" {
		name = u.Username
	}
	return chat.User{ID: u.ID, Name: name, IsBot: u.Bot}
}

// withRoles adds the roles of the sender's guild membership (nil in a
// DM), which agent bindings match.
func withRoles(u chat.User, m *discordgo.Member) chat.User {
	if m != nil && len(m.Roles) > 0 {
		u.Roles = append([]string(nil), m.Roles...)
	}
	return u
}

// message normalises a MESSAGE_CREATE; false means it is not for the
// gateway (the bot's own, a system message, nothing to read).
func (rd *reader) message(ctx context.Context, m *discordgo.Message) (chat.Inbound, bool) {
	me := rd.identity()
	if m.Author == nil || m.Author.ID == me || m.WebhookID != "" {
		return chat.Inbound{}, false
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return chat.Inbound{}, false
	}
	c, ci, err := rd.conv(ctx, m.GuildID, m.ChannelID)
	if err != nil {
		// Without the channel the message cannot be placed safely.
		rd.log.Warn("discord: cannot look the channel up; message dropped", "channel", m.ChannelID, "err", err)
		return chat.Inbound{}, false
	}
	in := chat.Inbound{
		Kind:     chat.KindMessage,
		Conv:     c,
		Msg:      chat.MsgRef{Conv: c, ID: m.ID},
		User:     withRoles(user(m.Author), m.Member),
		Files:    files(m.Attachments),
		DedupKey: "discord:" + m.ID,
		Time:     m.Timestamp,
	}
	if in.Time.IsZero() {
		in.Time = time.Now()
	}
	mentioned := false
	for _, u := range m.Mentions {
		if u != nil && u.ID == me && me != "" {
			mentioned = true
		}
	}
	text := stripMention(m.Content, me)
	if strings.TrimSpace(text) == "" && len(in.Files) == 0 {
		return chat.Inbound{}, false
	}
	if ref := m.MessageReference; ref != nil && m.Type == discordgo.MessageTypeReply && ref.MessageID != "" {
		r := chat.MsgRef{Conv: c, ID: ref.MessageID}
		in.ReplyTo = &r
		in.ReplyToBot = m.ReferencedMessage != nil && m.ReferencedMessage.Author != nil && m.ReferencedMessage.Author.ID == me
	}
	if c.Thread != "" {
		in.Bound = ci.owner == me && me != "" || rd.isBotThread(c.Thread) || ci.starterBot
		if ci.starterBot && in.ReplyTo == nil {
			// A thread someone started on one of the bot's messages
			// branches from that message.
			main := c
			main.Thread = ""
			in.ReplyTo, in.ReplyToBot = &chat.MsgRef{Conv: main, ID: c.Thread}, true
		}
	}
	in.Text = strings.TrimSpace(text)
	in.Command = chat.ParseCommand(in.Text, "")
	in.Mentioned = c.DM || mentioned || in.ReplyToBot
	return in, true
}

// stripMention removes the bot's mentions (<@id>, <@!id>) from text.
func stripMention(text, me string) string {
	if me == "" {
		return text
	}
	for _, m := range []string{"<@" + me + ">", "<@!" + me + ">"} {
		// "hi <@bot> there" → "hi there"; "<@bot> hi" → "hi"; line
		// breaks and the rest of the text stay as they are.
		text = strings.ReplaceAll(text, " "+m+" ", " ")
		text = strings.ReplaceAll(text, m+" ", "")
		text = strings.ReplaceAll(text, m, "")
	}
	return strings.TrimSpace(text)
}

// files lists a message's attachments; the file id is the CDN URL.
func files(atts []*discordgo.MessageAttachment) []chat.FileRef {
	var out []chat.FileRef
	for _, at := range atts {
		if at == nil || at.URL == "" {
			continue
		}
		kind := "document"
		switch {
		case strings.HasPrefix(at.ContentType, "image/"):
			kind = "photo"
		case strings.HasPrefix(at.ContentType, "audio/"):
			kind = "audio"
		case strings.HasPrefix(at.ContentType, "video/"):
			kind = "video"
		}
		out = append(out, chat.FileRef{ID: at.URL, Name: at.Filename, MimeType: at.ContentType, Size: int64(at.Size), Kind: kind})
	}
	return out
}

func (rd *reader) isBotThread(id string) bool {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.threads[id]
}

// interactionDeadline is how long an interaction token works.
const interactionDeadline = 15 * time.Minute

// ephemeralSubcommands answer only the user who asked.
var ephemeralSubcommands = map[string]bool{"status": true, "help": true, "usage": true, "whoami": true, "diff": true, "worktree": true}

// interaction normalises an INTERACTION_CREATE: an application command of
// this bot, or a button press.
func (rd *reader) interaction(ctx context.Context, ix *discordgo.Interaction) (chat.Inbound, bool) {
	var u *discordgo.User
	if ix.Member != nil && ix.Member.User != nil {
		u = ix.Member.User
	} else {
		u = ix.User
	}
	if u == nil || ix.Token == "" {
		return chat.Inbound{}, false
	}
	c, _, err := rd.conv(ctx, ix.GuildID, ix.ChannelID)
	if err != nil {
		rd.log.Warn("discord: cannot look the channel up; interaction dropped", "channel", ix.ChannelID, "err", err)
		return chat.Inbound{}, false
	}
	app := ix.AppID
	if app == "" {
		app = rd.app()
	}
	now := time.Now()
	in := chat.Inbound{Conv: c, User: withRoles(user(u), ix.Member), Mentioned: true, DedupKey: "discord:i:" + ix.ID, Time: now}
	handle := &chat.Interaction{Platform: platform, ID: ix.ID, Token: ix.Token, Conv: c, User: u.ID, Deadline: now.Add(interactionDeadline)}
	switch ix.Type {
	case discordgo.InteractionApplicationCommand:
		data := ix.ApplicationCommandData()
		if data.Name != rd.command || len(data.Options) == 0 {
			return chat.Inbound{}, false
		}
		sub := data.Options[0]
		var args []string
		for _, o := range sub.Options {
			if o != nil && o.Value != nil {
				args = append(args, strings.TrimSpace(fmt.Sprint(o.Value)))
			}
		}
		cmd := &chat.Command{Name: strings.ToLower(sub.Name), Args: strings.TrimSpace(strings.Join(args, " "))}
		in.Kind, in.Command = chat.KindMessage, cmd
		in.Text = strings.TrimSpace("/" + cmd.Name + " " + cmd.Args)
		in.Msg = chat.MsgRef{Conv: c, ID: ix.ID}
		kind := kindCommand
		if ephemeralSubcommands[cmd.Name] || (cmd.Args == "" && (cmd.Name == "model" || cmd.Name == "thinking" || cmd.Name == "queue")) {
			kind = kindCommandEphemeral
		}
		handle.Data = handleData{kind: kind, app: app}.String()
	case discordgo.InteractionMessageComponent:
		if ix.Message == nil {
			return chat.Inbound{}, false
		}
		msg := chat.MsgRef{Conv: c, ID: ix.Message.ID}
		in.Kind, in.Msg = chat.KindAction, msg
		in.Action = &chat.Action{Data: ix.MessageComponentData().CustomID, Msg: msg}
		handle.Msg = msg
		handle.Data = handleData{kind: kindButton, app: app}.String()
	default:
		return chat.Inbound{}, false
	}
	in.Interaction = handle
	return in, true
}
