package chat

import (
	"context"
	"errors"
	"time"
)

// Interaction is a handle on one platform interaction that expects an
// answer: a button press, or a command the platform delivered as an
// interaction (a Slack slash command, a Discord application command).
//
// It is opaque to the gateway except for Deadline, and serialisable: every
// field is plain data that survives a JSON round trip, so it can wait in a
// durable inbox and be answered by another replica. It is enough on its
// own: any replica's adapter for Platform answers it (Responder.Answer)
// without the Inbound it came with and without in-memory state (a Slack
// response_url and a Discord interaction token work from any process).
//
// The adapter gives the platform its instant feedback itself (Slack's 3 s
// ack, Discord's deferred response) once the sink returned nil; the gateway
// answers later, before Deadline.
type Interaction struct {
	// Platform is the adapter that answers it.
	Platform Platform
	// ID is the platform's id of the interaction: the Telegram callback
	// query id, the Discord interaction id, the Slack trigger_id.
	ID string
	// Token authorises the answer (the Discord interaction token); "" where
	// the platform needs none.
	Token string
	// ResponseURL is where the answer is posted (Slack response_url); ""
	// elsewhere.
	ResponseURL string
	// Conv is where the interaction happened.
	Conv ConvRef
	// Msg is the message that carried the pressed button; zero for
	// commands.
	Msg MsgRef
	// User is the id of the user who interacted; ephemeral answers go to
	// them.
	User string
	// Deadline is when the platform stops accepting the answer (Telegram
	// callback queries about 10 s after the press, Discord interaction
	// tokens 15 min, Slack response_url 30 min); zero if it never expires.
	// After it, Answer still delivers what it can (see Responder).
	Deadline time.Time
	// Data is adapter state the gateway never reads (at most a few hundred
	// bytes).
	Data string
}

// Expired reports whether the Deadline has passed at now.
func (ix Interaction) Expired(now time.Time) bool {
	return !ix.Deadline.IsZero() && !now.Before(ix.Deadline)
}

// Answer is the outcome of an interaction. Any combination of fields may be
// set; the zero Answer just ends the client's spinner where there is one.
type Answer struct {
	// Toast is a short notice for the user who interacted: Telegram shows
	// it as the callback answer, Slack and Discord as an ephemeral
	// message, web as a transient notice, the terminal as a note line.
	Toast string
	// Replace, if set, is new content for Interaction.Msg, the message
	// that carried the pressed button. An empty Markdown keeps the text
	// and replaces only the buttons (none removes them).
	Replace *Out
	// Reply, if set, is a message in answer, posted in Interaction.Conv
	// (Reply.Ephemeral is honoured as for Send).
	Reply *Out
}

// Responder answers interactions. It works from any replica, with only the
// handle, whether or not Run is active in this process.
//
// Answer may be called once per interaction. Before the Deadline the
// answer goes through the interaction itself (answerCallbackQuery, the
// response_url, the interaction token). After it, the adapter falls back to
// ordinary calls where the platform allows them: Replace becomes an edit of
// Interaction.Msg, Reply and Toast become normal messages in
// Interaction.Conv; where nothing can be delivered any more the error wraps
// ErrExpired. Answer returns the reference of the Reply message (zero if
// there is none or the platform gives none).
type Responder interface {
	Answer(ctx context.Context, ix Interaction, a Answer) (MsgRef, error)
}

// ErrExpired means an interaction can no longer be answered: its deadline
// passed, or the platform says the handle is used up.
var ErrExpired = errors.New("interaction expired")
