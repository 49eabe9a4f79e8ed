package slack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

// Adapter connects pibot to one Slack app in one workspace. Create it with
// New.
type Adapter struct {
	cfg   Config
	api   *slackapi.Client
	log   *slog.Logger
	calls *caller

	rd       *reader   // deliveries → chat.Inbound
	recv     *receiver // Socket Mode and HTTP deliveries
	out      *sender   // posts and updates
	answerer *answerer // interactions

	mu     sync.Mutex
	noAsst bool // the assistant status is refused (no scope, not an assistant thread)
}

// New validates cfg and builds an adapter. It makes no network call.
func New(cfg Config) (*Adapter, error) {
	if cfg.BotToken.IsZero() {
		return nil, errors.New("slack: adapters.slack.bot_token is required (the xoxb- bot token of the app)")
	}
	if !strings.HasPrefix(cfg.BotToken.Reveal(), "xoxb-") {
		return nil, errors.New("slack: adapters.slack.bot_token does not look like a bot token (xoxb-…)")
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeSocket
	case ModeSocket, ModeHTTP:
	default:
		return nil, fmt.Errorf("slack: adapters.slack.mode %q must be %q or %q", cfg.Mode, ModeSocket, ModeHTTP)
	}
	if cfg.Mode == ModeSocket && cfg.AppToken.IsZero() {
		return nil, errors.New("slack: adapters.slack.app_token is required in socket mode (an xapp- app-level token with connections:write)")
	}
	if cfg.Mode == ModeSocket && !strings.HasPrefix(cfg.AppToken.Reveal(), "xapp-") {
		return nil, errors.New("slack: adapters.slack.app_token does not look like an app-level token (xapp-…)")
	}
	if cfg.Mode == ModeHTTP && cfg.SigningSecret.IsZero() {
		return nil, errors.New("slack: adapters.slack.signing_secret is required in http mode")
	}
	root, err := APIRoot(cfg.APIURL)
	if err != nil {
		return nil, err
	}
	cfg.APIURL = root
	u, _ := url.Parse(root) // APIRoot parsed it
	if cfg.Command == "" {
		cfg.Command = "/pi"
	}
	if cfg.MaxDownload <= 0 {
		cfg.MaxDownload = 20 << 20
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 60 * time.Second}
	}
	opts := []slackapi.Option{slackapi.OptionAPIURL(cfg.APIURL), slackapi.OptionHTTPClient(client)}
	if !cfg.AppToken.IsZero() {
		opts = append(opts, slackapi.OptionAppLevelToken(cfg.AppToken.Reveal()))
	}
	a := &Adapter{
		cfg: cfg,
		api: slackapi.New(cfg.BotToken.Reveal(), opts...),
		log: log.With("adapter", "slack"),
	}
	a.rd = &reader{log: a.log}
	a.recv = &receiver{cfg: cfg, api: a.api, rd: a.rd, log: a.log, retryBase: retryBase, ready: make(chan struct{})}
	a.calls = &caller{limiter: newLimiter(cfg.Tiers, cfg.Rates), log: a.log, retryBase: retryBase,
		secrets: []secret.Secret{cfg.BotToken, cfg.AppToken, cfg.SigningSecret}, scopes: map[string]bool{}}
	a.recv.calls = a.calls
	a.out = &sender{calls: a.calls, api: a.api}
	a.answerer = &answerer{out: a.out, calls: a.calls, api: a.api, log: a.log, apiHost: u.Host}
	return a, nil
}

// platform is this adapter's chat.Platform.
const platform chat.Platform = "slack"

// maxLen is the longest rendered message: a section block's text (3,000
// characters), so that any message may carry buttons.
const maxLen = 3000

// statusRefresh renews the assistant status before Slack's 2-minute
// timeout.
const statusRefresh = 90 * time.Second

// Platform returns "slack".
func (a *Adapter) Platform() chat.Platform { return platform }

// Caps returns what the adapter can do in conv. Threads stream natively
// (append-only, with progress in the assistant status), an append every
// appendInterval at most; a DM's main line
// is answered by a message that is updated at most once a second (Slack
// streams only as thread replies in DMs, and a reply at top level keeps
// the main line readable). Where the status is refused (no assistant
// scope), threads are answered by updates too, with tool lines.
func (a *Adapter) Caps(conv chat.ConvRef) chat.Caps {
	// An event not acknowledged (Socket Mode) or answered non-2xx (HTTP)
	// is delivered again by Slack, a few times within minutes.
	c := chat.Caps{Dialect: chat.DialectSlack, MaxLen: maxLen, EditInterval: time.Second, Ephemeral: true,
		Redelivery: chat.Redelivers}
	a.mu.Lock()
	noAsst := a.noAsst
	a.mu.Unlock()
	if conv.Thread != "" && !noAsst {
		c.TypingRefresh = statusRefresh
		c.NativeStream, c.AppendOnly = true, true
		c.EditInterval = appendInterval
	}
	return c
}

// check validates that conv is a Slack conversation.
func check(conv chat.ConvRef) error {
	if conv.Platform != platform || conv.Channel == "" {
		return fmt.Errorf("slack: conversation %s is not a Slack one", conv.Key())
	}
	return nil
}

// render renders markdown as mrkdwn.
func render(md string) string { return chat.Render(md, chat.DialectSlack) }

// actions builds the actions block of a message's buttons; nil for none.
func actions(rows [][]chat.Button) (slackapi.Block, error) {
	var els []slackapi.BlockElement
	for _, row := range rows {
		for _, b := range row {
			if b.ID == "" || len(b.ID) > chat.MaxButtonID {
				return nil, fmt.Errorf("slack: button %q: id is %d bytes; pibot allows 1 to %d", b.Label, len(b.ID), chat.MaxButtonID)
			}
			if b.Label == "" {
				return nil, fmt.Errorf("slack: button %q has no label", b.ID)
			}
			label := b.Label
			if r := []rune(label); len(r) > 75 {
				label = string(r[:74]) + "…"
			}
			btn := slackapi.NewButtonBlockElement(b.ID, b.ID, slackapi.NewTextBlockObject(slackapi.PlainTextType, label, false, false))
			switch b.Style {
			case chat.StylePrimary:
				btn = btn.WithStyle(slackapi.StylePrimary)
			case chat.StyleDanger:
				btn = btn.WithStyle(slackapi.StyleDanger)
			}
			els = append(els, btn)
		}
	}
	if len(els) == 0 {
		return nil, nil
	}
	if len(els) > 25 {
		return nil, fmt.Errorf("slack: %d buttons; a message takes at most 25", len(els))
	}
	return slackapi.NewActionBlock("pibot_actions", els...), nil
}

// content is the options for a message's text and buttons: mrkdwn text,
// and with buttons a section block per part of it plus the actions. clear
// sends an empty block list without buttons, which removes earlier ones.
func content(mrkdwn string, buttons slackapi.Block, clear bool) []slackapi.MsgOption {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(mrkdwn, false)}
	if buttons == nil {
		if clear {
			opts = append(opts, slackapi.MsgOptionBlocks())
		}
		return opts
	}
	var blocks []slackapi.Block
	for _, part := range splitRunes(mrkdwn, maxLen) {
		blocks = append(blocks, slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, part, false, false), nil, nil))
	}
	return append(opts, slackapi.MsgOptionBlocks(append(blocks, buttons)...))
}

// splitRunes cuts s into parts of at most n runes, at a line end where one
// is near.
func splitRunes(s string, n int) []string {
	var out []string
	for {
		r := []rune(s)
		if len(r) <= n {
			if s != "" || len(out) == 0 {
				out = append(out, s)
			}
			return out
		}
		cut := string(r[:n])
		if i := strings.LastIndexByte(cut, '\n'); i > len(cut)/2 {
			cut = cut[:i+1]
		}
		out = append(out, cut)
		s = s[len(cut):]
	}
}

// Send posts m in conv (in its thread, if any), split into several
// messages if its rendering is longer than Caps.MaxLen (buttons go on the
// last one), and returns the last message. With Out.Ephemeral it posts an
// ephemeral message for that user (chat.postEphemeral), which has no
// reference that can be edited (ID "").
func (a *Adapter) Send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	return a.out.send(ctx, conv, m)
}

// Edit replaces a message's text and buttons (chat.update; no buttons
// removes them). A message that is gone is chat.ErrNotFound; a method in
// its Retry-After window or out of tokens is a *chat.RateLimitError
// (edits never wait it out).
func (a *Adapter) Edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	return a.out.update(ctx, ref, m, kindLive)
}

// Answer answers a slash command or a button press. Before the deadline,
// Toast and an ephemeral Reply go through the interaction's response_url
// (which works even in channels the bot is not in); after it, through
// chat.postEphemeral. Replace updates the message that carried the
// buttons (chat.update): an empty Markdown keeps its text and replaces
// only the buttons. A visible Reply is posted in the conversation. The
// handle needs no state of this process: any replica answers it.
func (a *Adapter) Answer(ctx context.Context, ix chat.Interaction, r chat.Answer) (chat.MsgRef, error) {
	return a.answerer.answer(ctx, ix, r)
}

// sender posts and updates messages (chat.postMessage, chat.postEphemeral,
// chat.update), split to fit.
type sender struct {
	calls *caller
	api   *slackapi.Client
}

// send posts m in conv (see Adapter.Send).
func (a *sender) send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	if err := check(conv); err != nil {
		return chat.MsgRef{}, err
	}
	if strings.TrimSpace(m.Markdown) == "" {
		return chat.MsgRef{}, errors.New("slack: send: empty message")
	}
	buttons, err := actions(m.Buttons)
	if err != nil {
		return chat.MsgRef{}, err
	}
	chunks := []string{m.Markdown}
	if chat.Len(render(m.Markdown), chat.DialectSlack) > maxLen {
		chunks = chat.Split(m.Markdown, chat.DialectSlack, maxLen)
	}
	var ref chat.MsgRef
	for i, md := range chunks {
		var b slackapi.Block
		if i == len(chunks)-1 {
			b = buttons
		}
		opts := append(content(render(md), b, false), slackapi.MsgOptionDisableLinkUnfurl(), slackapi.MsgOptionDisableMediaUnfurl())
		if conv.Thread != "" {
			opts = append(opts, slackapi.MsgOptionTS(conv.Thread))
		}
		if m.Ephemeral != "" {
			err := a.calls.do(ctx, op{method: "chat.postEphemeral", team: conv.Workspace, channel: conv.Channel, kind: kindFinal}, func(ctx context.Context) error {
				_, err := a.api.PostEphemeralContext(ctx, conv.Channel, m.Ephemeral, opts...)
				return err
			})
			if err != nil {
				return chat.MsgRef{}, err
			}
			ref = chat.MsgRef{Conv: conv}
			continue
		}
		var ts string
		err := a.calls.do(ctx, op{method: "chat.postMessage", team: conv.Workspace, channel: conv.Channel, kind: kindFinal}, func(ctx context.Context) (err error) {
			_, ts, err = a.api.PostMessageContext(ctx, conv.Channel, opts...)
			return err
		})
		if err != nil {
			return ref, err
		}
		ref = chat.MsgRef{Conv: conv, ID: ts}
	}
	return ref, nil
}

// update replaces a message's text and buttons as a call of kind k.
func (a *sender) update(ctx context.Context, ref chat.MsgRef, m chat.Out, k kind) error {
	if err := check(ref.Conv); err != nil {
		return err
	}
	if ref.ID == "" {
		return fmt.Errorf("slack: edit: the message has no ts (an ephemeral message): %w", chat.ErrNotFound)
	}
	if strings.TrimSpace(m.Markdown) == "" {
		return errors.New("slack: edit: empty message")
	}
	buttons, err := actions(m.Buttons)
	if err != nil {
		return err
	}
	return a.updateRendered(ctx, ref, render(m.Markdown), buttons, k)
}

// updateRendered replaces a message with mrkdwn, already rendered.
func (a *sender) updateRendered(ctx context.Context, ref chat.MsgRef, mrkdwn string, buttons slackapi.Block, k kind) error {
	opts := content(mrkdwn, buttons, true)
	return a.calls.do(ctx, op{method: "chat.update", team: ref.Conv.Workspace, channel: ref.Conv.Channel, kind: k, msg: ref.ID}, func(ctx context.Context) error {
		_, _, _, err := a.api.UpdateMessageContext(ctx, ref.Conv.Channel, ref.ID, opts...)
		return err
	})
}

// Delete deletes one of the bot's messages.
func (a *Adapter) Delete(ctx context.Context, ref chat.MsgRef) error {
	if err := check(ref.Conv); err != nil {
		return err
	}
	if ref.ID == "" {
		return fmt.Errorf("slack: delete: the message has no ts: %w", chat.ErrNotFound)
	}
	return a.calls.do(ctx, op{method: "chat.delete", team: ref.Conv.Workspace, channel: ref.Conv.Channel, kind: kindFinal}, func(ctx context.Context) error {
		_, _, err := a.api.DeleteMessageContext(ctx, ref.Conv.Channel, ref.ID)
		return err
	})
}

// emojiNames maps the emoji pibot uses to Slack's names.
var emojiNames = map[string]string{
	"👍": "+1", "👎": "-1", "👀": "eyes", "✅": "white_check_mark", "❌": "x", "⏳": "hourglass_flowing_sand",
	"🤔": "thinking_face", "⚠️": "warning", "🛑": "octagonal_sign", "🔁": "repeat",
}

// React adds a reaction (reactions.add). emoji is one of the common emoji
// pibot uses or a Slack name ("eyes" or ":eyes:"); reacting twice is not an
// error.
func (a *Adapter) React(ctx context.Context, ref chat.MsgRef, emoji string) error {
	if err := check(ref.Conv); err != nil {
		return err
	}
	name, ok := emojiNames[emoji]
	if !ok {
		name = strings.Trim(emoji, ":")
		for _, r := range name {
			if !(r == '_' || r == '-' || r == '+' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
				return fmt.Errorf("slack: react: %q is not an emoji name Slack knows", emoji)
			}
		}
	}
	err := a.calls.do(ctx, op{method: "reactions.add", team: ref.Conv.Workspace, channel: ref.Conv.Channel, kind: kindFinal}, func(ctx context.Context) error {
		return a.api.AddReactionContext(ctx, name, slackapi.NewRefToMessage(ref.Conv.Channel, ref.ID))
	})
	if code(err) == "already_reacted" {
		return nil
	}
	return err
}

// SetStatus shows status in the thread's assistant status
// (assistant.threads.setStatus, "is running `go test`…"); "" clears it.
// A DM's main line has no status (nil). Where Slack refuses the status (no
// assistant scope), threads fall back to updates with tool lines (see
// Caps) and SetStatus does nothing.
func (a *Adapter) SetStatus(ctx context.Context, conv chat.ConvRef, status string) error {
	if err := check(conv); err != nil {
		return err
	}
	a.mu.Lock()
	noAsst := a.noAsst
	a.mu.Unlock()
	if conv.Thread == "" || noAsst {
		return nil
	}
	if status != "" && !strings.HasPrefix(status, "is ") {
		status = "is " + status
	}
	p := slackapi.AssistantThreadsSetStatusParameters{ChannelID: conv.Channel, ThreadTS: conv.Thread, Status: status}
	err := a.calls.do(ctx, op{method: "assistant.threads.setStatus", team: conv.Workspace, channel: "", kind: kindLive}, func(ctx context.Context) error {
		return a.api.SetAssistantThreadsStatusContext(ctx, p)
	})
	switch code(err) {
	case "missing_scope", "not_allowed_token_type", "no_permission", "unknown_method":
		a.mu.Lock()
		a.noAsst = true
		a.mu.Unlock()
		a.log.Warn("slack: the assistant status is refused; threads show tool progress as lines instead", "err", err)
		return nil
	}
	return err
}

// OpenThread answers a channel message in its thread: Slack threads need
// no creation, so the thread of msg is msg.Conv with Thread = msg.ID. (The
// gateway opens threads on main-line messages only; a message that is
// itself a thread reply has no thread of its own in Slack, and a reply
// posted with its ts lands in the thread it is in.)
func (a *Adapter) OpenThread(_ context.Context, msg chat.MsgRef, _ string) (chat.ConvRef, error) {
	if err := check(msg.Conv); err != nil {
		return chat.ConvRef{}, err
	}
	if msg.ID == "" {
		return chat.ConvRef{}, errors.New("slack: open thread: the message has no ts")
	}
	c := msg.Conv
	c.Thread = msg.ID
	return c, nil
}

// RegisterCommands learns the gateway's command names. Slack has no
// command menu per bot (the slash command is declared in the app
// manifest); the names tell the adapter which "!name" in a message is a
// command and which is just text.
func (a *Adapter) RegisterCommands(_ context.Context, cmds []chat.CommandSpec) error {
	names := make([]string, 0, len(cmds))
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	a.rd.setCommands(names)
	return nil
}
