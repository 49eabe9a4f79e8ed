package cluster

import "time"

// Admission is one inbound event as a shared store admits it in one step:
// the dedupe, the sender's budget and the inbox item together, so a
// duplicate or an event over its sender's budget never becomes an item.
type Admission struct {
	// Dedupe is the event's dedupe key ("": not deduplicated).
	Dedupe string
	// Seen is, when Dedupe is "", the dedupe key an earlier step recorded
	// for the event (Seen): the enqueued item's id is noted in it, so
	// forgetting it after a refusal whose answer was lost keeps the key
	// (the item is in the inbox) and the redelivery is a duplicate.
	Seen string
	// Budget is the sender budget's key ("": not budgeted).
	Budget string
	// Key and Data are the inbox item: its location and its contents.
	Key  string
	Data []byte
	// Take asks for the items of Key nobody took yet, the new one
	// included, to be taken for the caller as Consume takes them. The
	// caller holds the session's lease.
	Take bool
	// Run, with Take, says the caller executes the new item at once (its
	// location has nothing else to do): when it is the only item taken,
	// the admission records that its work began (Inbox.Begin), sparing
	// a round trip.
	Run bool
}

// Admitted is what became of an Admission.
type Admitted struct {
	// Dup: the dedupe key was seen before; nothing else was done.
	Dup bool
	// Wait > 0: the sender is over budget (a token was taken, as
	// Budget.Reserve takes one); the event was not enqueued.
	Wait time.Duration
	// ID is the new item's id when it was enqueued.
	ID string
	// Taken are the items taken for the caller (Admission.Take), oldest
	// first, the new one among them.
	Taken []InboxItem
}
