// Package crashpoint names the durable steps of a message's life, from its
// inbox record to its acknowledgement, so that a test build can end pibot
// at exactly one of them the way kill -9 does and check what a restart
// makes of it (e2e/crashpoint_test.go).
//
// In a release build Hit does nothing and is inlined away: neither the
// names nor the mechanism are in the binary (a test checks it). A build
// with the tag crashpoints (go build -tags crashpoints) reads
// PIBOT_CRASHPOINT once, "NAME" or "NAME#N", and at the Nth time the step
// NAME is reached (the first when N is not given) writes one line to
// stderr and kills its own process with SIGKILL: no deferred function,
// buffer flush or clean stop runs.
//
// The embedded inbox compacts its file only after 4,096 records, more
// than a test's conversation writes: a crashpoints build reads
// PIBOT_CRASHPOINT_INBOX_COMPACT, a number of records, as the inbox's
// threshold instead (InboxCompactAfter), so the suite reaches the
// compaction's points. A release build has no such knob.
package crashpoint

// The points, in the order of a message's life.
const (
	// DedupeSeen: the dedupe recorded a new event's key (pending, in
	// cluster mode) before the intake classified it (a command, a thread
	// to open); its item is not enqueued.
	DedupeSeen = "dedupe.seen"
	// InboxAppend: an accepted event's inbox item is durable (the
	// platform is told "received" next).
	InboxAppend = "inbox.append"
	// Bound: a new conversation's location is bound to its session file
	// in the index; the file is not created yet.
	Bound = "session.bound"
	// UserEntry: a run appended the entry of a chat message.
	UserEntry = "session.user"
	// ToolCall: the model's tool call is flushed to the session; the
	// tool has not started.
	ToolCall = "session.toolcall"
	// ToolResult: a tool's result is flushed to the session.
	ToolResult = "session.toolresult"
	// AnswerEntry: a final answer of the model is appended to the
	// session.
	AnswerEntry = "session.answer"
	// PostedPart: the platform confirmed a new message of a reply, which
	// the reply journal does not name yet.
	PostedPart = "reply.post"
	// ReplyJournal: a pibot.reply entry naming the reply's messages is
	// written to the session file.
	ReplyJournal = "reply.journal"
	// ReplyFinal: the platform confirmed a reply's final text; its
	// delivery is not recorded.
	ReplyFinal = "reply.final"
	// DeliveryRecord: a run's pibot.delivery entry is appended.
	DeliveryRecord = "delivery.record"
	// InboxAck: a message's inbox item is acknowledged.
	InboxAck = "inbox.ack"
	// Lease: (cluster mode) a session's lease is granted, before its file
	// is loaded.
	Lease = "session.lease"
	// Fence: (cluster mode) the takeover's pibot.lease marker is durable
	// in the session file.
	Fence = "session.fence"
	// PumpHandoff: (cluster mode) the pump took a key's items from the
	// shared inbox, before it hands them to the mailbox.
	PumpHandoff = "pump.handoff"

	// The embedded inbox's compaction of its file (cluster.LocalInbox),
	// step by step. It also compacts when it opens, so every start passes
	// each of them once: the first compaction while running (on a
	// goroutine of its own, messages still accepted) is hit 2.

	// CompactPartial: a first part of the compacted file is written to
	// its temporary file, not fsynced (at the start: half of it; while
	// running: the records of what the inbox held when the compaction
	// began, no lock held); the inbox file is the old one, whole.
	CompactPartial = "inbox.compact.partial"
	// CompactWritten: the compacted file is whole (while running: with
	// the records written meanwhile) and fsynced, not renamed over the
	// inbox file.
	CompactWritten = "inbox.compact.written"
	// CompactRenamed: the compacted file is renamed over the inbox file;
	// the directory is not fsynced.
	CompactRenamed = "inbox.compact.renamed"
	// CompactSynced: the directory is fsynced; the inbox still appends to
	// the old file's handle, not yet to the new one.
	CompactSynced = "inbox.compact.synced"
)
