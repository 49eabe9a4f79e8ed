// Package stream shows one live agent reply in a chat conversation.
//
// A Controller is created per reply. The agent's event goroutine feeds it
// (SetText, EndMessage, SetThinking, ToolStart, ToolEnd, Status); its own
// goroutine, started by Start and stopped by Finish or Abort, renders the
// whole reply on every tick and shows it at the adapter's cadence:
//
//   - the first post waits for about 24 characters or 0.8 s, and a typing
//     indicator is refreshed until then and during long tool runs;
//   - the reply is split with chat.Split at 90% of Caps.MaxLen; full chunks
//     become follow-on messages, the tail stays live with a "▌" cursor;
//   - at most one call is in flight, each message is edited at most once
//     per Caps.EditInterval, unchanged text is not re-sent, and later
//     updates coalesce (latest wins);
//   - a *chat.RateLimitError pauses the reply for its RetryAfter and doubles
//     the interval (up to 10 s); after three consecutive strikes only the
//     final text is delivered;
//   - a message that is gone (chat.ErrNotFound) or keeps failing is left
//     behind and the reply continues in a new message;
//   - with Caps.NativeStream and a chat.Streamer the reply streams natively
//     while it fits in one message, falling back to send+edit on failure.
//
// Finish (or Abort) always delivers the complete text: it retries, waits out
// retry-after pauses up to Options.FinalWait, and sends the rest as new
// messages when edits fail.
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
	// Tools adds one compact line per tool call: "bash · go test ./... · 12s".
	Tools Verbosity = "tools"
	// Verbose adds tool arguments, result excerpts and thinking.
	Verbose Verbosity = "verbose"
)

// Options configure a Controller. The zero value is usable.
type Options struct {
	// Verbosity defaults to Tools.
	Verbosity Verbosity
	// ReplyTo is the message the first message of the reply answers.
	ReplyTo *chat.MsgRef
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
}

// Tuning defaults (platforms.md §9.2–9.3).
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
