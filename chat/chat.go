// Package chat is the contract between pibot's gateway and its chat
// platform adapters (Telegram, Slack, Discord, web, terminal): normalised
// inbound events, outbound messages, capabilities, the Adapter interface and
// its optional abilities, and a markdown layer (one splitter, one renderer
// per platform dialect).
//
// Adapters import chat and their platform SDK only; they know nothing about
// agents, sessions or models. The gateway imports chat and never a platform
// SDK. chat itself depends on the standard library and goldmark.
package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Platform names a chat platform: "telegram", "slack", "discord", "web", "term".
type Platform string

// ConvRef says where a conversation lives on a platform.
type ConvRef struct {
	Platform Platform
	// Workspace is the Slack team or Discord guild; "" elsewhere.
	Workspace string
	// Channel is the Slack channel, Discord channel or thread, Telegram
	// chat id, web/term conversation id.
	Channel string
	// Thread is the Slack thread_ts or Telegram forum topic id; "" for a
	// main line.
	Thread string
	// DM is true for one-to-one conversations with the bot.
	DM bool
}

// Key returns a stable string for the conversation location, unique across
// platforms: platform:workspace:channel[:thread].
func (c ConvRef) Key() string {
	k := string(c.Platform) + ":" + c.Workspace + ":" + c.Channel
	if c.Thread != "" {
		k += ":" + c.Thread
	}
	return k
}

// String returns Key.
func (c ConvRef) String() string { return c.Key() }

// MsgRef identifies one platform message.
type MsgRef struct {
	Conv ConvRef
	// ID is the Slack ts, Discord message id, Telegram message_id.
	ID string
}

// Key returns "<conversation key>#<id>", unique across platforms.
func (m MsgRef) Key() string { return m.Conv.Key() + "#" + m.ID }

// User is the sender of an event.
type User struct {
	ID    string
	Name  string
	IsBot bool
}

// InboundKind says what an inbound event is.
type InboundKind int

// Inbound kinds.
const (
	KindMessage InboundKind = iota // a chat message (may carry a command)
	KindAction                     // a button press
	// KindMoved is a platform event: the conversation moved to a new
	// location (a Telegram group that became a supergroup); Moved is set.
	// Only an adapter produces it, from the platform's own service data,
	// never from anything a user typed: no text or command maps to it.
	KindMoved
)

// Move says where a conversation went: every location of From (and its
// threads) now lives at To.
type Move struct {
	From ConvRef
	To   ConvRef
}

// Command is a parsed "/name args" (or a platform's native command).
type Command struct {
	Name string // lower case, without "/" or "@bot"
	Args string
}

// Action is a button press. Data is the opaque button ID sent earlier.
type Action struct {
	Data string
	// Msg is the message the button was on (ID may be "" if unknown).
	Msg MsgRef
	// Token lets the adapter answer this very press (callback query id,
	// interaction token); opaque to the gateway.
	Token string
}

// FileRef is a file attached to an inbound message.
type FileRef struct {
	ID       string
	Name     string
	MimeType string
	Size     int64
	// Kind is "photo", "document", "voice", "audio", "video" or "".
	Kind string
}

// Inbound is one normalised event from a platform.
type Inbound struct {
	Kind InboundKind
	Conv ConvRef
	Msg  MsgRef
	// ReplyTo is the message this one replies to, if any.
	ReplyTo *MsgRef
	// ReplyToBot is true when ReplyTo is one of the bot's own messages.
	ReplyToBot bool
	User       User
	// Text is the message text with the bot mention stripped.
	Text string
	// Mentioned is true if the bot was mentioned (or, in a group, replied to).
	Mentioned bool
	// Command is set when the text is a command.
	Command *Command
	Action  *Action
	// Moved is set on KindMoved events only.
	Moved *Move
	Files []FileRef
	// DedupKey identifies the platform event across redeliveries.
	DedupKey string
	Time     time.Time
}

// Sink receives inbound events. It returns nil once the event is durable
// (or deliberately ignored); only then may the adapter acknowledge it to
// the platform. An error means: do not acknowledge, let the platform retry.
type Sink func(ctx context.Context, in Inbound) error

// ButtonStyle colours a button where the platform can.
type ButtonStyle int

// Button styles.
const (
	StyleDefault ButtonStyle = iota
	StylePrimary
	StyleDanger
)

// Button is an inline button. ID is opaque and at most MaxButtonID bytes.
type Button struct {
	ID    string
	Label string
	Style ButtonStyle
}

// MaxButtonID is the longest button ID every platform accepts (Telegram's
// 64-byte callback_data).
const MaxButtonID = 64

// OutFile is a file to send.
type OutFile struct {
	Name     string
	MimeType string
	Reader   io.Reader
	Size     int64
	Caption  string
}

// Out is an outbound message. Markdown is CommonMark; adapters render it.
// The caller keeps Markdown within the adapter's Caps.MaxLen once rendered
// (see Split).
type Out struct {
	Markdown string
	Buttons  [][]Button
	ReplyTo  *MsgRef
	Silent   bool
}

// Caps describes what an adapter can do in one conversation.
type Caps struct {
	Dialect Dialect
	// MaxLen is the longest rendered message, in Dialect's units.
	MaxLen int
	// EditInterval is the minimum time between edits of one message.
	EditInterval time.Duration
	// TypingRefresh is how often a typing indicator must be renewed
	// (0: the adapter has none).
	TypingRefresh time.Duration
	// NativeStream is true if OpenStream gives a platform stream (Telegram
	// drafts, Slack streams); otherwise replies are streamed by edits.
	NativeStream bool
	// AppendOnly marks a native stream that can only append (Slack's
	// chat.appendStream): earlier text cannot be rewritten.
	AppendOnly bool
	// MaxButtonID is the longest button ID in bytes (0: MaxButtonID).
	MaxButtonID int
}

// Adapter connects one platform.
type Adapter interface {
	Platform() Platform
	Caps(conv ConvRef) Caps
	// Run receives events until ctx ends and returns nil then.
	Run(ctx context.Context, sink Sink) error
	// Send posts a message and returns its reference.
	Send(ctx context.Context, conv ConvRef, m Out) (MsgRef, error)
	// Edit replaces a message's text and buttons. An edit that changes
	// nothing returns nil.
	Edit(ctx context.Context, ref MsgRef, m Out) error
}

// Deleter can delete messages.
type Deleter interface {
	Delete(ctx context.Context, ref MsgRef) error
}

// Typer shows a typing or status indicator; "" clears it where possible.
type Typer interface {
	SetStatus(ctx context.Context, conv ConvRef, status string) error
}

// Reactor adds a reaction (an emoji) to a message.
type Reactor interface {
	React(ctx context.Context, ref MsgRef, emoji string) error
}

// ActionReply answers a button press: a short toast, and optionally new
// content for the message that carried the buttons.
type ActionReply struct {
	Toast   string
	Replace *Out
}

// ActionResponder answers button presses (Telegram answerCallbackQuery,
// Discord interaction response, Slack ack).
type ActionResponder interface {
	Respond(ctx context.Context, in Inbound, r ActionReply) error
}

// Uploader sends a file to a conversation.
type Uploader interface {
	Upload(ctx context.Context, conv ConvRef, f OutFile, replyTo *MsgRef) (MsgRef, error)
}

// Downloader fetches an inbound file.
type Downloader interface {
	Download(ctx context.Context, f FileRef, w io.Writer) error
}

// CommandSpec describes a command for platform menus.
type CommandSpec struct {
	Name        string
	Description string
}

// CommandRegistrar publishes the command list (Telegram setMyCommands,
// Discord application commands).
type CommandRegistrar interface {
	RegisterCommands(ctx context.Context, cmds []CommandSpec) error
}

// Stream is a platform's native streaming of one reply.
type Stream interface {
	// Update shows the full markdown so far (latest wins).
	Update(ctx context.Context, markdown string) error
	// Finish delivers the final message and ends the stream.
	Finish(ctx context.Context, final Out) (MsgRef, error)
	// Abort ends the stream without a final message.
	Abort(ctx context.Context) error
}

// Streamer opens native streams.
type Streamer interface {
	OpenStream(ctx context.Context, conv ConvRef, replyTo *MsgRef) (Stream, error)
}

// ErrRateLimited is wrapped by every RateLimitError.
var ErrRateLimited = errors.New("rate limited")

// ErrNotFound means the message or conversation no longer exists (or can no
// longer be edited): callers fall back to sending a new message.
var ErrNotFound = errors.New("not found")

// RateLimitError is a platform 429. Scope is "message", "chat", "bot" or
// "global".
type RateLimitError struct {
	RetryAfter time.Duration
	Scope      string
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limited (%s scope), retry after %s", e.Scope, e.RetryAfter)
}

// Unwrap returns ErrRateLimited.
func (e *RateLimitError) Unwrap() error { return ErrRateLimited }

// ParseCommand parses "/name args" or "/name@bot args". It returns nil if
// text is not a command, or names another bot. botName may be "".
func ParseCommand(text, botName string) *Command {
	if !strings.HasPrefix(text, "/") || len(text) < 2 {
		return nil
	}
	head, args, _ := strings.Cut(text[1:], " ")
	if i := strings.IndexAny(head, "\n\t"); i >= 0 {
		args = strings.TrimSpace(head[i:] + " " + args)
		head = head[:i]
	}
	name, at, hasAt := strings.Cut(head, "@")
	if hasAt && botName != "" && !strings.EqualFold(at, botName) {
		return nil
	}
	if name == "" {
		return nil
	}
	for _, r := range name {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return nil
		}
	}
	return &Command{Name: strings.ToLower(name), Args: strings.TrimSpace(args)}
}
