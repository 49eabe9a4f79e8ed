package cluster

import (
	"context"
	"errors"
	"time"
)

// This file is the contract between the gateway and its coordination
// stores: the interfaces the gateway is given (Inbox, Dedupe, Budget,
// Index, Locker) and the optional abilities it finds on them by type
// assertion. Two implementations carry it: this package's embedded ones
// (LocalInbox, LocalDedupe, LocalBudget, LocalIndex, LocalLocker: one
// process, files in the data directory) and cluster/rediscluster's shared
// ones (cluster mode). Each declares what it implements with compile-time
// guards, and both pass the conformance suites of cluster/clustertest.
//
// # Errors
//
// Every method may fail in one of four ways, and the gateway tells them
// apart by what the error wraps, never by its text:
//
//   - The disk. An embedded store could not write its file (a full disk,
//     an I/O error). Index errors wrap ErrWrite; the inbox's wrap the
//     file's error. Nothing was changed in memory that the file does not
//     hold. The store recovers by itself once a later write or Sync
//     succeeds; the gateway turns degraded (refuses messages, tells their
//     senders) and probes it with Sync until it does.
//   - Unreachable. A shared store could not be reached or did not answer
//     in time: the error wraps a net.Error, io.EOF, io.ErrUnexpectedEOF,
//     context.DeadlineExceeded, ECONNREFUSED or ECONNRESET. The gateway
//     counts these against an outage of the shared store (logged once,
//     shown by chat.HealthShower adapters) rather than logging each.
//   - Maybe done. Any error of a call that changes a shared store may
//     come after the change was made and its answer lost. Such calls are
//     written to be repeated: an Admit whose answer was lost after it
//     enqueued keeps its dedupe key (Dedupe.Forget leaves a key that
//     names an item), so the redelivery is a duplicate; a Seen whose
//     answer was lost is undone by Forget; an Enqueue whose answer was
//     lost may leave a second item of the event once the redelivery is
//     taken, which its session recognises; a take (Consume, Claim, Admit
//     with Take) whose answer was lost hands its items over with the next
//     take of the key; an Ack, Leave or Begin run twice does nothing the
//     second time. A caller that gets an error from a
//     change therefore retries it or takes the key again soon; it never
//     assumes the change did not happen.
//   - Refused. ErrLeaseHeld from Locker.Acquire: another holder has the
//     key. It is an answer, not a failure: nothing is to be retried.
//
// A call whose ctx ended returns an error wrapping ctx.Err() (a shared
// store's call is then also maybe done).

// Inbox keeps accepted events durable until they are applied, queued
// under the key of their chat location. The gateway needs it in every
// mode; in cluster mode it must also be a Consumer (gateway.New refuses
// one that is not).
type Inbox interface {
	// Enqueue stores data under key and returns its id at once, with a
	// function that waits until the item is durable: the caller may
	// start handling the item while the write completes, but must not
	// acknowledge the event to its platform before durable returns nil.
	// An error from Enqueue or from durable is the disk (embedded) or
	// maybe done (shared): the caller acknowledges nothing, acks id if
	// it has one, and lets the platform deliver the event again.
	Enqueue(ctx context.Context, key string, data []byte) (id string, durable func() error, err error)
	// Ack ends item id of key: it will never be handed out again.
	// Acknowledging an item that is not pending under key does nothing,
	// so a failed Ack (the disk, maybe done) is retried as it is.
	Ack(ctx context.Context, key, id string) error
	// Pending lists key's items not acknowledged, oldest first,
	// whoever handles them. It changes nothing.
	Pending(ctx context.Context, key string) ([]InboxItem, error)
	// Keys lists the keys that have pending items. It changes nothing.
	Keys(ctx context.Context) ([]string, error)
	// Claim takes over the items of key that a process which ended (or,
	// in a shared inbox, another consumer, or this one by Leave) was
	// handling, oldest first, and records that this process handles
	// them now. The caller holds the session's lease. An error is maybe
	// done: the items it may have taken come with the next take.
	Claim(ctx context.Context, key string) ([]InboxItem, error)
}

// Consumer is an Inbox that hands out the items nobody took yet: the
// pump's way from the inbox to the sessions in cluster mode (LocalInbox,
// rediscluster.Inbox). Consume records that this process handles them; a
// crash counts against one once its work begins (Beginner). The caller
// holds the session's lease. An error is maybe done: a failed take is
// worth trying again soon, since it may have taken items.
type Consumer interface {
	Consume(ctx context.Context, key string) ([]InboxItem, error)
}

// Peeker is a Consumer that tells, for many keys at once, which of them a
// take would hand anything now (LocalInbox, rediscluster.Inbox: one round
// trip where a take of each key costs one each): Takeable returns the
// keys among keys that a Consume would hand an item, and with claim also
// those a Claim would. It may name a key a take then finds empty (an item
// ended meanwhile), never leaves out one with such items when it looks;
// an item that comes after it looked comes with its own notice or the
// next look. It changes nothing; an error is unreachable. The pump peeks
// at the sessions it holds before it takes any (cluster mode's poll).
type Peeker interface {
	Takeable(ctx context.Context, keys []string, claim bool) ([]string, error)
}

// Watcher is a shared Inbox that tells, as they come, the keys other
// replicas enqueue items for (rediscluster.Inbox): Watch calls kick on its
// own goroutine until ctx ends, and returns nil then. A notice may be lost
// (a dropped connection): the caller polls as well. Watch's error means
// the watch could not start or ended early (unreachable).
type Watcher interface {
	Watch(ctx context.Context, kick func(key string)) error
}

// Leaver is an Inbox that forgets the items of a key this process took
// (Consume, Claim) once the lease of their session is lost (cut) or
// released (LocalInbox, rediscluster.Inbox); the next Claim hands them
// over again. With cut, each whose work began (Beginner) counts one
// crash, as if this process had crashed executing it. A second Leave of
// the same key finds nothing. A failed cut Leave counts nothing: an
// outage is not the item's doing.
type Leaver interface {
	Leave(ctx context.Context, key string, cut bool) error
}

// Beginner is an Inbox that counts a crash only against the items whose
// work was executing when it came (LocalInbox, rediscluster.Inbox): Begin
// records that this process now executes the items ids of key (a run
// took their messages, or their command's or press's handler runs). An
// item that merely waited is never blamed for a crash it did not cause. A
// failed Begin only loses a crash count; running it twice is harmless.
type Beginner interface {
	Begin(ctx context.Context, key string, ids ...string) error
}

// Quarantiner is an Inbox that counts the crashes of its items
// (InboxItem.Crashes) and can set one aside for good (LocalInbox,
// rediscluster.Inbox): the item stays stored, but is never pending
// again. Setting aside an item that is not pending under key does
// nothing. After an error the item stays pending (maybe done: it may be
// set aside already).
type Quarantiner interface {
	Quarantine(ctx context.Context, key, id string) error
}

// Syncer is an Inbox that can be made durable and recovered after a
// failed write: nil from Sync means it can take items again, so it
// doubles as a health probe (LocalInbox: an fsync that also recovers the
// file; rediscluster.Inbox: Redis answers).
type Syncer interface {
	Sync() error
}

// Dedupe drops redelivered platform events: Seen records key and reports
// whether it was recorded already (within the store's TTL, by any
// replica). Forget lets a key be seen again (its event was not taken
// after all); a key a shared admission noted an enqueued item in stays,
// so the redelivery of an event whose item is in the inbox is still a
// duplicate. The embedded LocalDedupe (memory) never fails; a shared
// one's error from Seen is unreachable, and maybe done (the key may be
// recorded): a caller that then refuses the event (the platform delivers
// it again) must Forget the key, or the redelivery is dropped as a
// duplicate of an event never taken. Forget's error is maybe done too:
// the caller repeats it until it succeeds (the gateway retries it in the
// background, and a redelivery that finds such a key forgets it first).
// Forgetting a key twice, or one an admission recorded its item in,
// changes nothing more.
type Dedupe interface {
	Seen(ctx context.Context, key string) (bool, error)
	Forget(ctx context.Context, key string) error
}

// ErrInFlight is wrapped by the error of a Committer's Seen (and of its
// SeenReserve and Admit) when another delivery of the event recorded its
// key and has not committed it: that delivery is being taken now, or its
// replica died before it committed or forgot the key, which then expires
// within the store's pending time. Neither a duplicate nor a new event
// yet: the caller refuses the event as a passing state (the platform
// delivers it again) and does not Forget the key, which is not its own.
var ErrInFlight = errors.New("cluster: dedupe: another delivery of the event is in flight")

// Committer is a Dedupe whose Seen records a key for a short pending
// time only (rediscluster.Dedupe): it lives for the store's TTL once its
// event is committed, by the admission that enqueues the event's item
// (Admission.Seen) or by Commit. So a key whose replica died between
// Seen and the enqueue, or whose refused event's Forget was still
// failing, expires by itself, and the platform's redelivery is taken
// then; until then Seen answers ErrInFlight. Commit records key for the
// TTL whatever it held (nothing, a pending key): an event handled without
// an item (a command answered at intake), or replayed from the inbox. Its
// error is unreachable and maybe done.
type Committer interface {
	Commit(ctx context.Context, key string) error
}

// SeenReserver is a Dedupe that also takes the sender's budget token in
// the same round trip (rediscluster.Admission): Seen, then, unless the
// key was seen, Budget.Reserve of budgetKey. A budget that cannot be
// asked answers 0. Errors are those of Seen.
type SeenReserver interface {
	SeenReserve(ctx context.Context, key, budgetKey string) (dup bool, wait time.Duration, err error)
}

// Admitter is a Dedupe that admits an event in one round trip
// (rediscluster.Admission): the dedupe, a token of the sender's budget,
// the inbox item and, for the session's holder, the taking of every item
// of its key nobody took yet (see Admission). A Redis round trip is the
// largest part of what cluster mode adds to a message. An error is
// unreachable and maybe done: the item may be enqueued (its dedupe key
// then stays, so the redelivery is a duplicate) and items may be taken
// (the next take of the key hands them over).
type Admitter interface {
	Admit(ctx context.Context, a Admission) (Admitted, error)
}

// Budget rate-limits inbound messages per sender: Reserve takes one token
// for key and says how long the caller would have to wait for it (0: the
// token was there). An error (unreachable) means the budget could not be
// asked; the gateway then lets the message through.
type Budget interface {
	Reserve(ctx context.Context, key string) (time.Duration, error)
}

// Index maps a location key to the session file that holds it. It is a
// cache of what the session files say (their heads name their locations):
// Bind is seen by Get at once and made durable by the next Sync; Set binds
// durably; an empty path unbinds. KeysWithPrefix lists the locations of a
// conversation: the key itself and keys that start with prefix + ":".
// Errors of Bind, Set and Sync are the disk (wrapping ErrWrite: a later
// Sync that succeeds recovers the store) or unreachable and maybe done
// (the binding may be stored); Get and KeysWithPrefix change nothing.
type Index interface {
	Get(ctx context.Context, loc string) (path string, ok bool, err error)
	KeysWithPrefix(ctx context.Context, prefix string) ([]string, error)
	Bind(ctx context.Context, loc, path string) error
	Set(ctx context.Context, loc, path string) error
	Sync(ctx context.Context) error
}

// Locker grants the right to write a session file: Acquire returns the
// key's Lease with a fence above minFence (the highest fence already seen
// in the file), or an error wrapping ErrLeaseHeld when another holder has
// it. Any other error is the disk (the local fence counter) or
// unreachable; a shared Locker's grant whose answer was lost expires with
// its TTL, unrenewed.
type Locker interface {
	Acquire(ctx context.Context, key string, minFence int64) (Lease, error)
}

// LeaseProber is a Locker that tells whether a lease is held, by anyone,
// without trying to take it (rediscluster.Locker): one round trip where a
// takeover attempt costs five and a read of the session file. It changes
// nothing; an error is unreachable.
type LeaseProber interface {
	Taken(ctx context.Context, key string) (bool, error)
}

// DeadlineLease is a Lease that knows when it may pass to another holder
// at the earliest (rediscluster's local deadline, moved by each renewal).
// Once the deadline has passed it is as good as lost, even before its own
// timer closes Done.
type DeadlineLease interface {
	Deadline() time.Time
}

// PermanentLease is a Lease that is never lost, only released (the
// LocalLocker's): its holder need not watch Done, and no other replica can
// take its session over.
type PermanentLease interface {
	Permanent() bool
}
