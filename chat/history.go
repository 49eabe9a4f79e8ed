package chat

import (
	"context"
	"time"
)

// History is what the gateway offers an adapter that shows past
// conversations (a HistoryUser): the conversations of the adapter's own
// platform and what each one says, rebuilt from its session. An adapter
// never reaches sessions any other way. The History an adapter receives is
// bound to its platform: it refuses conversations of another platform.
type History interface {
	// Conversations lists the platform's conversations (main lines only),
	// most recently active first, at most limit of them.
	Conversations(ctx context.Context, limit int) ([]ConvSummary, error)
	// Transcript rebuilds conv's main line and its threads from the
	// session: each location shows the branch its head is on, as the
	// model's context has it (after a compaction: a note with the
	// summary, then the kept messages), so what it shows is what the
	// model sees there. A thread shows its branch after the message it
	// hangs off. conv.Thread is ignored. An unknown conversation is an
	// empty Transcript, not an error.
	Transcript(ctx context.Context, conv ConvRef) (Transcript, error)
}

// HistoryUser is an adapter that shows history; the gateway hands it a
// History bound to the adapter's platform before it runs the adapters.
type HistoryUser interface {
	UseHistory(h History)
}

// ConvSummary describes one past conversation.
type ConvSummary struct {
	Conv ConvRef
	// Title is the session's name, else the first user message (short).
	Title string
	// Updated is when the conversation's main line last changed.
	Updated time.Time
	// Messages counts the user and bot messages on the main line.
	Messages int
	// Agent is the agent the conversation's session belongs to, "" where
	// sessions record none (a gateway with only the default agent).
	Agent string
}

// Transcript is a conversation as its session records it.
type Transcript struct {
	// Messages holds the main line's messages, then each thread's, each
	// location's in order.
	Messages []HistoryMessage
	// Threads lists the conversation's threads.
	Threads []HistoryThread
	// Elsewhere lists the ids of the conversation's messages that the
	// session records but that are no longer on the branch of the place
	// they were posted in (a branch move, such as a /tree jump, left
	// them): a view that still shows them there should not. (A branch
	// move may put them on another place's branch: Messages then lists
	// them there, with Origin set.)
	Elsewhere []string
}

// HistoryMessage is one message of a Transcript. The bot's reply to a
// message is its run's final text (tool lines are not recorded).
type HistoryMessage struct {
	// ID is the platform message id when the session knows it (a user
	// message, a delivered reply); otherwise it is "" and the message
	// cannot be replied to.
	ID string
	// Thread is the place the message is shown in, the thread whose
	// branch holds it ("" for the main line).
	Thread string
	// Moved is set when the message was posted in another place than
	// Thread: a branch move (a /tree jump onto another thread's branch)
	// put it on this place's branch too. Origin is then the thread it
	// was posted in ("" for the main line), which a reply to it names.
	// The same ID may so appear once per place whose branch holds it.
	Moved  bool
	Origin string
	// FromBot is true for the bot's replies.
	FromBot bool
	// Note marks what stands for messages rather than being one: the
	// summary a compaction put in place of the messages before it.
	Note bool
	Text string
	Time time.Time
}

// HistoryThread is one thread of a Transcript.
type HistoryThread struct {
	// ID is the thread's id (ConvRef.Thread).
	ID string
	// Root is the id of the message the thread hangs off, "" if unknown.
	Root string
	// RootThread is the location of Root ("" for the main line).
	RootThread string
	// Title is the first user message of the thread (short).
	Title string
}
