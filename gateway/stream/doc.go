// Package stream shows one live agent reply in a chat conversation.
//
// A Controller is created per reply. The agent's event goroutine feeds it
// (SetText, EndMessage, SetThinking, ToolStart, ToolEnd, Status); its own
// goroutine, started by Start and stopped by Finish or Abort, renders the
// reply on every tick and shows it at the adapter's cadence through one of
// three surfaces, chosen from the adapter's Caps:
//
//   - edit (the default): messages are sent and edited. The reply is split
//     with chat.Split at 90% of Caps.MaxLen; full chunks become follow-on
//     messages, the tail stays live with a "▌" cursor. A message that is
//     gone (chat.ErrNotFound) or keeps failing is left behind and the reply
//     continues in a new message.
//   - native (Caps.NativeStream and a chat.Streamer: Telegram drafts, the
//     web chat): the reply streams natively while it fits in one message,
//     then, or when the stream fails, editing takes over.
//   - append-only (NativeStream with Caps.AppendOnly: Slack streams): the
//     stream only ever receives finished text, in order — the settled head
//     of assistant messages (up to the last word boundary, holding back
//     what could still change its rendering: an open code block, a table
//     row, an open emphasis, code span or link; see settled) and the lines
//     of finished tool calls — and never a change to what it has shown. Unfinished text, running tools and the status line are
//     reported out of band on the typing line (chat.Typer), which is kept
//     up for the whole reply and updated as soon as the status changes. A
//     full stream is finished and the reply continues in a new one; a final
//     text that replaces a message already shown is appended after it; a
//     stream that keeps failing is left behind and its text shown again in
//     a new one, and if streaming fails for the final text, the rest is
//     sent as plain messages.
//
// On every surface:
//
//   - the first post waits for about 24 characters or 0.8 s, and a typing
//     indicator is refreshed until then and during long tool runs;
//   - at most one call is in flight, each message is edited at most once
//     per Caps.EditInterval, unchanged text is not re-sent, and later
//     updates coalesce (latest wins);
//   - a *chat.RateLimitError pauses the reply for its RetryAfter and doubles
//     the interval (up to 10 s); after three consecutive strikes only the
//     final text is delivered.
//
// Tool lines are formatted in one place (render.go) from the tool's name,
// its JSON arguments and its output: "✓ `bash · go test ./... · 12s`",
// followed in Tools by the start of a failed tool's output (on one line, 80
// characters), and in Verbose by the first ten lines of every output in a
// code block.
//
// Finish (or Abort) always delivers the complete text: it retries, waits out
// retry-after pauses up to Options.FinalWait, and sends the rest as new
// messages when edits fail.
//
// Cut splits a reply around something posted in the middle of it (an
// approval card): the part said so far is shown complete where it is,
// and the rest, from the first unfinished tool call on, continues in new
// messages (or a new native stream) below. A mutex keeps Cut, the
// publishing goroutine's steps and the final delivery from calling the
// platform at once.
package stream

import (
	"log/slog"
	"time"

	"github.com/pibot/pibot/chat"
)

// Verbosity selects what a reply shows besides the assistant's text.
type Verbosity string

// Verbosities.
const (
	// Quiet shows only the assistant's text.
	Quiet Verbosity = "quiet"
	// Tools adds one compact line per tool call: "bash · go test ./... · 12s",
	// and the start of a failed tool's output.
	Tools Verbosity = "tools"
	// Verbose adds longer tool arguments, the first ten lines of every
	// tool's output, and thinking.
	Verbose Verbosity = "verbose"
)

// Options configure a Controller. The zero value is usable.
type Options struct {
	// Verbosity defaults to Tools.
	Verbosity Verbosity
	// ReplyTo is the message the first message of the reply answers.
	ReplyTo *chat.MsgRef
	// Recipient is the id of the user the reply is for, passed to native
	// streams (chat.StreamOptions.Recipient: Slack streams in channels
	// need it); "" where not known.
	Recipient string
	// RecipientTeam is the recipient's workspace
	// (chat.StreamOptions.RecipientTeam); "" means the conversation's.
	RecipientTeam string
	// FinalWait bounds how long Finish and Abort wait out rate limits and
	// retries; default 60 s.
	FinalWait time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Now replaces time.Now for tool durations and scheduling.
	Now func() time.Time
	// Splitters, when set, lends the splitter for the adapter's dialect,
	// shared by many replies; nil makes one per reply.
	Splitters *chat.Splitters
	// Continue names the messages of a reply posted earlier (by a process
	// that crashed before recording its delivery) that this reply takes
	// over: they are edited to show it, further messages are posted for
	// what they cannot hold and extra ones are removed, instead of a new
	// copy being posted. The reply is shown by editing messages then.
	Continue []chat.MsgRef
	// OnPost, when set, is called after each message of the reply is
	// posted (Refs includes it), before the next call to the platform, on
	// the goroutine that posted it: the caller can record the message
	// before anything else happens.
	OnPost func()
	// Allowed, when set, is asked at every call the reply makes to the
	// platform; once it returns false no call goes out again (posts,
	// edits, deletes, drafts, status lines): the caller has lost the
	// conversation, to another replica that now answers.
	Allowed func() bool
}

// Tuning defaults: the edit pace and limits the platforms tolerate.
const (
	firstPostChars  = 24
	firstPostDelay  = 800 * time.Millisecond
	defaultInterval = time.Second
	maxInterval     = 10 * time.Second
	maxStrikes      = 3  // consecutive rate limits before only the final is sent
	maxEditFails    = 3  // consecutive failures before a message is left behind
	maxAbandons     = 2  // messages left behind before only the final is sent
	maxSendFails    = 3  // consecutive send failures before only the final is sent
	splitPercent    = 90 // chunks are cut at this share of Caps.MaxLen
	minPause        = 250 * time.Millisecond
	defaultWait     = 60 * time.Second
	editAttempts    = 3
	sendAttempts    = 5
)

// wakeSlack: a change does not wake a publishing loop whose timer fires at
// most this long after the next edit is allowed. The edit comes that much
// later instead of costing a goroutine hand-off per token.
const wakeSlack = 10 * time.Millisecond
