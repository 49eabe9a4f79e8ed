package discord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

// Adapter connects pibot to one Discord bot. Create it with New.
type Adapter struct {
	cfg    Config
	log    *slog.Logger
	calls  *caller
	client *http.Client // downloads: no Authorization header, no rewrite
	api    *url.URL     // nil: the real Discord

	app      *application
	in       *reader
	edits    *editLog
	answerer *answerer
	gw       *gatewayClient
	feeder   *feeder
}

// New validates cfg and builds an adapter. It makes no network call.
func New(cfg Config) (*Adapter, error) {
	if cfg.Token.IsZero() {
		return nil, errors.New("discord: adapters.discord.token is required (developer portal > your application > Bot > Reset Token)")
	}
	tok := strings.TrimPrefix(strings.TrimSpace(cfg.Token.Reveal()), "Bot ")
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return nil, errors.New("discord: adapters.discord.token does not look like a bot token")
	}
	cfg.Token = secret.New(tok)
	a := &Adapter{cfg: cfg, edits: &editLog{last: map[string]editMark{}}}
	root, err := APIRoot(cfg.APIURL)
	if err != nil {
		return nil, err
	}
	if cfg.APIURL != "" {
		a.api, _ = url.Parse(strings.TrimSuffix(root, apiPath)) // APIRoot parsed it
	}
	if cfg.ApplicationID != "" && !isID(cfg.ApplicationID) {
		return nil, fmt.Errorf("discord: adapters.discord.application_id %q is not a Discord id", cfg.ApplicationID)
	}
	for i, g := range cfg.Guilds {
		if !isID(g) {
			return nil, fmt.Errorf("discord: adapters.discord.guilds[%d] %q is not a Discord guild id", i, g)
		}
	}
	if a.cfg.Command == "" {
		a.cfg.Command = "pi"
	}
	if !isCommand(a.cfg.Command) {
		return nil, fmt.Errorf("discord: adapters.discord.command %q must be 1-32 characters of a-z, 0-9, _ and -", a.cfg.Command)
	}
	if a.cfg.MaxDownload <= 0 {
		a.cfg.MaxDownload = 20 << 20
	}
	if a.cfg.IdentifyBackoff <= 0 {
		a.cfg.IdentifyBackoff = 5 * time.Second
	}
	a.log = cfg.Logger
	if a.log == nil {
		a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a.log = a.log.With("adapter", "discord")
	base := cfg.HTTPClient
	if base == nil {
		base = &http.Client{Timeout: 30 * time.Second}
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	plain := *base
	a.client = &plain
	a.calls = &caller{log: a.log, token: cfg.Token, api: a.api, root: root, limiter: newLimiter()}
	hc := *base
	hc.Transport = &transport{r: a.calls, base: rt}
	s, err := discordgo.New("Bot " + tok)
	if err != nil {
		return nil, errors.New("discord: new client failed")
	}
	s.Client = &hc
	s.ShouldRetryOnRateLimit = false // a 429 is returned, never slept on without bound
	s.MaxRestRetries = 0             // 5xx retries are this adapter's, bounded
	s.LogLevel = -1                  // discordgo's own log stays silent (its debug level prints secrets)
	s.Debug = false
	s.UserAgent = "DiscordBot (https://github.com/pibot/pibot, 1) pibot"
	a.calls.s = s
	a.app = &application{calls: a.calls, id: cfg.ApplicationID}
	a.in = &reader{calls: a.calls, log: a.log, command: a.cfg.Command, app: a.app.known,
		channels: map[string]channelInfo{}, threads: map[string]bool{}}
	a.answerer = &answerer{calls: a.calls, edits: a.edits, log: a.log, out: a, app: a.app.get, acking: map[string]chan struct{}{}}
	a.gw = &gatewayClient{calls: a.calls, log: a.log, token: cfg.Token,
		state: &resumeState{store: &stateStore{path: cfg.StatePath}, log: a.log, identifyBase: a.cfg.IdentifyBackoff}, onReady: func(user, app string) { // from READY
			a.in.setMe(user)
			a.app.learn(app)
		}}
	a.feeder = &feeder{seen: newRecent(4096), in: a.in, answerer: a.answerer, log: a.log, command: a.cfg.Command}
	return a, nil
}

// platform is this adapter's chat.Platform.
const platform chat.Platform = "discord"

// maxLen is Discord's content limit, in Unicode code points.
const maxLen = 2000

// editInterval is the least time between two edits of one message.
const editInterval = time.Second

// Platform returns "discord".
func (a *Adapter) Platform() chat.Platform { return platform }

// Caps returns Discord's abilities: Discord markdown, 2,000 code points,
// one edit a second per message, typing refreshed every 8 s. Out.Ephemeral
// falls back to a normal message in Send (Discord's ephemeral messages
// exist only as interaction answers, see Answer). A message the gateway
// refused is not delivered again (chat.NoRedelivery): Discord's gateway
// has no acknowledgement of a MESSAGE_CREATE.
func (a *Adapter) Caps(chat.ConvRef) chat.Caps {
	return chat.Caps{Dialect: chat.DialectDiscord, MaxLen: maxLen, EditInterval: editInterval,
		TypingRefresh: 8 * time.Second, MaxButtonID: chat.MaxButtonID}
}

// channelOf returns the Discord channel a conversation posts in: the
// thread for a thread, else the channel.
func channelOf(conv chat.ConvRef) (string, error) {
	if conv.Platform != platform {
		return "", fmt.Errorf("discord: conversation %s is not a Discord one", conv.Key())
	}
	id := conv.Channel
	if conv.Thread != "" {
		id = conv.Thread
	}
	if !isID(id) {
		return "", fmt.Errorf("discord: conversation %s: %q is not a Discord channel id", conv.Key(), id)
	}
	return id, nil
}

func messageID(ref chat.MsgRef) (string, error) {
	if !isID(ref.ID) {
		return "", fmt.Errorf("discord: message id %q is not a Discord id", ref.ID)
	}
	return ref.ID, nil
}

// noMentions blocks @everyone, role and user pings coming from model text.
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// components builds message components; nil for no buttons.
func components(rows [][]chat.Button) ([]discordgo.MessageComponent, error) {
	var out []discordgo.MessageComponent
	for _, row := range rows {
		var r []discordgo.MessageComponent
		for _, b := range row {
			if b.ID == "" || len(b.ID) > chat.MaxButtonID {
				return nil, fmt.Errorf("discord: button %q: id is %d bytes; pibot's limit is 1 to %d", b.Label, len(b.ID), chat.MaxButtonID)
			}
			label := []rune(b.Label)
			if len(label) == 0 {
				return nil, fmt.Errorf("discord: button %q has no label", b.ID)
			}
			if len(label) > 80 {
				label = append(label[:79], '…')
			}
			style := discordgo.SecondaryButton
			switch b.Style {
			case chat.StylePrimary:
				style = discordgo.SuccessButton
			case chat.StyleDanger:
				style = discordgo.DangerButton
			}
			r = append(r, discordgo.Button{Label: string(label), Style: style, CustomID: b.ID})
		}
		for len(r) > 0 {
			n := min(len(r), 5)
			out = append(out, discordgo.ActionsRow{Components: r[:n]})
			r = r[n:]
		}
	}
	if len(out) > 5 {
		return nil, fmt.Errorf("discord: %d rows of buttons; Discord shows at most 5", len(out))
	}
	return out, nil
}

// render renders markdown for Discord and checks the length.
func render(md string) (string, error) {
	s := chat.Render(md, chat.DialectDiscord)
	if n := chat.Len(s, chat.DialectDiscord); n > maxLen {
		return "", fmt.Errorf("discord: message renders to %d characters; Discord takes %d", n, maxLen)
	}
	return s, nil
}

// chunks splits md into parts that each render within maxLen, code fences
// balanced in each.
func chunks(md string) []string {
	if chat.Len(chat.Render(md, chat.DialectDiscord), chat.DialectDiscord) <= maxLen {
		return []string{md}
	}
	return chat.Split(md, chat.DialectDiscord, maxLen)
}

// Send posts m, split into several messages when its rendering is longer
// than 2,000 code points (the reply on the first, buttons on the last), and
// returns the last. Link embeds are suppressed and no mention pings anyone.
func (a *Adapter) Send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	ch, err := channelOf(conv)
	if err != nil {
		return chat.MsgRef{}, err
	}
	if strings.TrimSpace(m.Markdown) == "" {
		return chat.MsgRef{}, errors.New("discord: send: empty message")
	}
	comps, err := components(m.Buttons)
	if err != nil {
		return chat.MsgRef{}, err
	}
	parts := chunks(m.Markdown)
	var ref chat.MsgRef
	for i, md := range parts {
		content, err := render(md)
		if err != nil {
			return ref, err
		}
		ms := &discordgo.MessageSend{Content: content, AllowedMentions: noMentions(), Flags: discordgo.MessageFlagsSuppressEmbeds}
		if m.Silent {
			ms.Flags |= discordgo.MessageFlagsSuppressNotifications
		}
		if i == len(parts)-1 {
			ms.Components = comps
		}
		if i == 0 && m.ReplyTo != nil && isID(m.ReplyTo.ID) {
			fail := false
			ms.Reference = &discordgo.MessageReference{MessageID: m.ReplyTo.ID, ChannelID: ch, FailIfNotExists: &fail}
		}
		var msg *discordgo.Message
		err = a.calls.do(ctx, modeSend, chanRoute(ch, "messages"), "send", func(opts ...discordgo.RequestOption) (err error) {
			msg, err = a.calls.s.ChannelMessageSendComplex(ch, ms, opts...)
			return err
		})
		if err != nil {
			return ref, err
		}
		ref = chat.MsgRef{Conv: conv, ID: msg.ID}
		a.edits.mark(msg.ID, content, comps, false)
	}
	return ref, nil
}

// Edit replaces a message's text and buttons (no buttons removes them). A
// message answered through an interaction (ref.Handle set) is edited with
// the interaction token, which also reaches ephemeral messages. Edits of one
// message are at least a second apart (a closer one is a
// *chat.RateLimitError); an edit that changes nothing returns nil without a
// call; a message that is gone is chat.ErrNotFound.
func (a *Adapter) Edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	ch, err := channelOf(ref.Conv)
	if err != nil {
		return err
	}
	id, err := messageID(ref)
	if err != nil {
		return err
	}
	if strings.TrimSpace(m.Markdown) == "" {
		return errors.New("discord: edit: empty message")
	}
	content, err := render(m.Markdown)
	if err != nil {
		return err
	}
	comps, err := components(m.Buttons)
	if err != nil {
		return err
	}
	if comps == nil {
		comps = []discordgo.MessageComponent{}
	}
	ok, err := a.edits.gate(id, content, comps)
	if err != nil {
		return fmt.Errorf("discord: edit: %w", err)
	}
	if !ok {
		return nil
	}
	if h, ok := parseHandle(ref.Handle); ok {
		err = a.answerer.webhookEdit(ctx, h, id, &discordgo.WebhookEdit{Content: &content, Components: &comps, AllowedMentions: noMentions()})
		if !errors.Is(err, chat.ErrExpired) {
			if err == nil {
				a.edits.mark(id, content, comps, true)
			}
			return err
		}
	}
	me := &discordgo.MessageEdit{ID: id, Channel: ch, Content: &content, Components: &comps,
		AllowedMentions: noMentions(), Flags: discordgo.MessageFlagsSuppressEmbeds}
	err = a.calls.do(ctx, modeLive, chanRoute(ch, "messages"), "edit", func(opts ...discordgo.RequestOption) error {
		_, err := a.calls.s.ChannelMessageEditComplex(me, opts...)
		return err
	})
	if err == nil {
		a.edits.mark(id, content, comps, true)
	}
	return err
}

// Delete deletes a message.
func (a *Adapter) Delete(ctx context.Context, ref chat.MsgRef) error {
	ch, err := channelOf(ref.Conv)
	if err != nil {
		return err
	}
	id, err := messageID(ref)
	if err != nil {
		return err
	}
	return a.calls.do(ctx, modeSend, chanRoute(ch, "messages"), "delete", func(opts ...discordgo.RequestOption) error {
		return a.calls.s.ChannelMessageDelete(ch, id, opts...)
	})
}

// SetStatus shows "typing…" for about 10 s (refresh every
// Caps.TypingRefresh); Discord cannot clear it, so "" does nothing.
func (a *Adapter) SetStatus(ctx context.Context, conv chat.ConvRef, status string) error {
	if status == "" {
		return nil
	}
	ch, err := channelOf(conv)
	if err != nil {
		return err
	}
	return a.calls.do(ctx, modeLive, chanRoute(ch, "typing"), "typing", func(opts ...discordgo.RequestOption) error {
		return a.calls.s.ChannelTyping(ch, opts...)
	})
}

// React adds the bot's reaction (a Unicode emoji) to a message.
func (a *Adapter) React(ctx context.Context, ref chat.MsgRef, emoji string) error {
	ch, err := channelOf(ref.Conv)
	if err != nil {
		return err
	}
	id, err := messageID(ref)
	if err != nil {
		return err
	}
	if emoji == "" || strings.ContainsAny(emoji, "/?#") {
		return fmt.Errorf("discord: react: %q is not an emoji", emoji)
	}
	return a.calls.do(ctx, modeSend, chanRoute(ch, "reactions"), "react", func(opts ...discordgo.RequestOption) error {
		return a.calls.s.MessageReactionAdd(ch, id, url.PathEscape(emoji), opts...)
	})
}
