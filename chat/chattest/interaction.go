package chattest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/pibot/pibot/chat"
)

// interactionTTL is how long an injected press can be answered through its
// interaction.
const interactionTTL = time.Minute

// interaction makes the handle a platform would attach to the press in.
func (a *Adapter) interaction(in chat.Inbound) *chat.Interaction {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nextIx++
	return &chat.Interaction{
		Platform: a.platform,
		ID:       "ix" + strconv.Itoa(a.nextIx),
		Conv:     in.Conv,
		Msg:      in.Action.Msg,
		User:     in.User.ID,
		Deadline: a.now().Add(interactionTTL),
	}
}

// Interaction returns a fresh handle for a press of a button on msg by
// user, as Inject attaches one; for tests that answer without injecting.
func (a *Adapter) Interaction(msg chat.MsgRef, user string) chat.Interaction {
	return *a.interaction(chat.Inbound{Conv: msg.Conv, Action: &chat.Action{Msg: msg}, User: chat.User{ID: user}})
}

// Answer answers an interaction: the toast is recorded as the call's Text,
// Replace edits ix.Msg (only its buttons when Replace.Markdown is empty),
// Reply is posted in ix.Conv. Each handle answers once; a second answer
// wraps chat.ErrExpired. After the deadline the toast becomes a normal
// message, as the chat.Responder contract allows.
func (a *Adapter) Answer(ctx context.Context, ix chat.Interaction, r chat.Answer) (chat.MsgRef, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodRespond, Conv: ix.Conv, Ref: ix.Msg, Text: r.Toast}
	if err := a.beginLocked(&c, ix.Msg.Key()); err != nil {
		return chat.MsgRef{}, err
	}
	if ix.Platform != a.platform || ix.ID == "" {
		c.Err = fmt.Errorf("chattest: answer: %q is not an interaction of %s", ix.ID, a.platform)
		a.recordLocked(c)
		return chat.MsgRef{}, c.Err
	}
	if a.answered[ix.ID] {
		c.Err = fmt.Errorf("chattest: answer %s: already answered: %w", ix.ID, chat.ErrExpired)
		a.recordLocked(c)
		return chat.MsgRef{}, c.Err
	}
	if r.Replace != nil {
		msg, err := a.liveLocked(&c, ix.Msg)
		if err != nil {
			return chat.MsgRef{}, err
		}
		if r.Replace.Markdown != "" {
			msg.Text = r.Replace.Markdown
		}
		msg.Buttons = r.Replace.Buttons
		msg.Edits++
		c.Buttons = r.Replace.Buttons
	}
	a.answered[ix.ID] = true
	if r.Toast != "" && ix.Expired(c.Time) {
		a.postLocked(ix.Conv, chat.Out{Markdown: r.Toast})
	}
	var ref chat.MsgRef
	if r.Reply != nil {
		c.Ephemeral = r.Reply.Ephemeral
		ref = a.sendLocked(ix.Conv, *r.Reply)
	}
	a.recordLocked(c)
	return ref, nil
}

// ThreadAdapter is an Adapter that also implements chat.ThreadOpener, like
// a platform whose answers to channel messages go in threads the bot
// opens (Discord, Slack). The plain Adapter does not open threads, so a
// gateway answers on the main line as it does on Telegram.
type ThreadAdapter struct {
	*Adapter
}

var _ chat.ThreadOpener = ThreadAdapter{}

// Threads returns a view of a that also implements chat.ThreadOpener. Both
// share calls, messages and faults (FailNext(MethodOpenThread, ...)).
func (a *Adapter) Threads() ThreadAdapter { return ThreadAdapter{a} }

// OpenThread returns msg's conversation with Thread = msg.ID, as the
// chat.ThreadOpener invariant requires; opening it again returns the same.
func (t ThreadAdapter) OpenThread(ctx context.Context, msg chat.MsgRef, name string) (chat.ConvRef, error) {
	a := t.Adapter
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodOpenThread, Conv: msg.Conv, Ref: msg, Text: name}
	if err := a.beginLocked(&c, ""); err != nil {
		return chat.ConvRef{}, err
	}
	if msg.ID == "" || msg.Conv.Thread != "" {
		c.Err = fmt.Errorf("chattest: open thread: %s is not a main-line message", msg.Key())
		a.recordLocked(c)
		return chat.ConvRef{}, c.Err
	}
	conv := msg.Conv
	conv.Thread = msg.ID
	a.recordLocked(c)
	return conv, nil
}
