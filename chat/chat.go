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
	"time"
)

// Platform names a chat platform: "telegram", "slack", "discord", "web", "term".
type Platform string

// ConvRef says where a conversation lives on a platform.
type ConvRef struct {
	Platform Platform
	// Workspace is the Slack team or Discord guild; "" elsewhere.
	Workspace string
	// Channel is the Slack channel, Discord channel (the parent channel,
	// for a thread), Telegram chat id, web/term conversation id.
	Channel string
	// Thread is the id of the message the thread hangs off, "" for a main
	// line: the Slack thread_ts (the parent's ts), the Discord starter
	// message id (which is also the thread channel's id), the Telegram
	// forum topic id (the id of the topic's creation message). Web threads
	// are the exception: their id is chosen by the browser. Channel stays
	// the parent channel, so a thread's Key extends its channel's.
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
	// ID is the Slack ts, Discord message id, Telegram message_id. It may
	// be "" for a message that cannot be edited or deleted (an ephemeral
	// one).
	ID string
	// Handle is opaque, serialisable adapter state needed to edit or
	// delete the message later (the interaction token of a Discord
	// deferred reply); "" for most messages. The gateway stores it and
	// hands it back untouched; Key ignores it.
	Handle string
}

// Key returns "<conversation key>#<id>", unique across platforms.
func (m MsgRef) Key() string { return m.Conv.Key() + "#" + m.ID }

// User is the sender of an event.
type User struct {
	ID    string
	Name  string
	IsBot bool
	// Roles are the sender's Discord role ids in the guild the message
	// was sent in (agent bindings match them); nil elsewhere.
	Roles []string `json:",omitempty"`
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
	Name string // lower case, without the prefix or "@bot"
	Args string
}

// Action is a button press. Data is the opaque button ID sent earlier.
// The press is answered through Inbound.Interaction.
type Action struct {
	Data string
	// Msg is the message the button was on (ID may be "" if unknown).
	Msg MsgRef
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
	// Bound is true when the bot already takes part in this thread, so
	// that people need not mention it there. An adapter sets it when the
	// event itself says so: the Discord adapter for a thread the bot
	// opened, or one started on a message of the bot's. Otherwise the
	// gateway sets it before the access check when Conv.Key() is bound
	// to a session (a thread the bot answered in, on a platform whose
	// adapter is a ThreadOpener): Slack's events do not tell whether the
	// bot replied in a thread, so the Slack adapter never sets it.
	// access.Check waives the mention rule only when Bound and
	// Conv.Thread != "", never for a main line. Telegram forum topics are
	// channels of their own, not reply threads: the Telegram adapter
	// never sets it.
	Bound bool
	// Command is set when the text is a command.
	Command *Command
	Action  *Action
	// Interaction is set on button presses and on commands the platform
	// delivered as interactions; the gateway answers through it (see
	// Responder). nil for plain messages and text commands.
	Interaction *Interaction
	// Moved is set on KindMoved events only.
	Moved *Move
	Files []FileRef
	// DedupKey identifies the platform event across redeliveries.
	DedupKey string
	// Schedule is set by the gateway's scheduler only (never by an
	// adapter, never from text): the id of the scheduled prompt this
	// message is a firing of.
	Schedule string `json:",omitempty"`
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
	// Ephemeral, when not "", is the id of the one user who should see
	// the message (Slack chat.postEphemeral, Discord ephemeral interaction
	// responses). Such a message may come back with an empty MsgRef.ID: it
	// cannot be edited or deleted. Where Caps.Ephemeral is false (Telegram,
	// web, terminal) the adapter posts a normal message in the
	// conversation instead, which everyone there sees: never put in an
	// ephemeral message what the rest of the conversation may not read.
	Ephemeral string
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
	// StatusLine is true if the adapter shows Typer.SetStatus as a line
	// of text beside the reply (the web chat) rather than a bare typing
	// indicator: the reply then keeps it current from start to end
	// ("thinking…", "writing…", a tool, "2 queued message(s)"), sending
	// each change at once.
	StatusLine bool
	// NativeStream is true if OpenStream gives a platform stream (Telegram
	// drafts, Slack streams); otherwise replies are streamed by edits.
	NativeStream bool
	// AppendOnly (meaningful with NativeStream only) marks a native stream
	// that can only append, like Slack's chat.appendStream: text once shown
	// can be neither rewritten nor removed. On such a stream:
	//   - every Stream.Update must extend the markdown of the previous one
	//     (the previous text is a prefix of the new); the adapter sends only
	//     the addition. An Update that does not extend it returns an error
	//     wrapping ErrNotAppend and sends nothing;
	//   - Finish's final Markdown must extend the last Update as well (the
	//     adapter appends the difference and attaches the buttons); a final
	//     text that does not is an ErrNotAppend error and the stream stays
	//     open, so the caller can Abort and Send the message instead.
	// The stream controller therefore shows only finished text on such a
	// stream (never a tail that may still change, such as a tool progress
	// line or an unclosed markdown construct) and reports progress out of
	// band (Typer.SetStatus), the way the terminal prints only what an
	// edit adds.
	AppendOnly bool
	// Ephemeral is true if Out.Ephemeral really hides a message from
	// everyone but its user; false means it falls back to a normal
	// message.
	Ephemeral bool
	// MaxButtonID is the longest button ID in bytes (0: MaxButtonID).
	MaxButtonID int
	// Redelivery is what becomes of an event the Sink refused: what the
	// sender is told about it depends on it.
	Redelivery Redelivery
}

// Adapter connects one platform.
//
// Every outbound method (Send, Edit and all optional abilities) works
// whether or not Run is active in this process, before Run starts and after
// it returned: in cluster mode another replica may be the one receiving
// events (the one polling Telegram, holding the Discord shard), and this
// replica still answers its sessions. Outbound failures are typed: a
// platform 429 is a *RateLimitError, a message or conversation that is gone
// wraps ErrNotFound.
type Adapter interface {
	Platform() Platform
	Caps(conv ConvRef) Caps
	// Run receives events until ctx ends and returns nil then.
	Run(ctx context.Context, sink Sink) error
	// Send posts a message and returns its reference.
	Send(ctx context.Context, conv ConvRef, m Out) (MsgRef, error)
	// Edit replaces a message's text and buttons. An edit that changes
	// nothing returns nil; a message that is gone is ErrNotFound.
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

// StreamOptions says how to open a native stream.
type StreamOptions struct {
	// ReplyTo is the message the reply answers, if any.
	ReplyTo *MsgRef
	// Recipient is the id of the user the reply is for: Slack streams in
	// channels need it (recipient_user_id). "" where not known.
	Recipient string
	// RecipientTeam is the recipient's workspace (Slack
	// recipient_team_id); "" means Conv.Workspace.
	RecipientTeam string
}

// Streamer opens native streams.
type Streamer interface {
	OpenStream(ctx context.Context, conv ConvRef, opts StreamOptions) (Stream, error)
}

// ErrNotAppend is wrapped by the error of an Update or Finish that does not
// extend the text of an append-only stream (see Caps.AppendOnly).
var ErrNotAppend = errors.New("append-only stream: text does not extend what was sent")

// ThreadOpener opens a thread under a message, on platforms where the bot's
// answer to a channel message belongs in a thread the bot creates
// (Discord). The gateway calls it only after the access check allowed the
// event (an ignored message must never create a thread), before it binds
// the location, and then uses the returned conversation for the location.
//
// Invariant: the returned ConvRef is msg.Conv with Thread = msg.ID, the id
// of the message the thread hangs off (see ConvRef.Thread), so the
// location's key is the same whichever replica opens the thread. OpenThread
// is idempotent: a thread that already exists on msg is returned as it is.
// name is a title for the thread (the platform may shorten it).
type ThreadOpener interface {
	OpenThread(ctx context.Context, msg MsgRef, name string) (ConvRef, error)
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
