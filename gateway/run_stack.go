package gateway

// runStackBytes is the stack a run goroutine grows to before it starts
// (growRunStack). A run records its messages from deep inside the
// provider's stream (the model's iterator calls the agent, which calls
// the gateway, which encodes the session line): the path needs some 20 KB
// of stack, and a goroutine starts with a few. Grown there, the stack was
// copied two or three times per run with all those frames on it (at 1,000
// busy conversations, 12 % of the gateway's CPU went to copying stacks);
// grown while it is still empty, it is copied once, with nothing on it.
const runStackBytes = 24 << 10

// growRunStack makes the calling goroutine's stack big enough for a run.
// Its frame is the size wanted: calling it grows the stack once, and the
// stack stays grown after it returns (until a garbage collection finds it
// mostly unused for long).
//
//go:noinline
func growRunStack() byte {
	var pad [runStackBytes]byte
	return touch(pad[:])
}

// touch reads b so that the compiler keeps growRunStack's frame.
//
//go:noinline
func touch(b []byte) byte { return b[len(b)-1] }

// journalStackBytes is the stack a reply journal entry is written with
// (growJournalStack). The entry is written on the reply's stream goroutine,
// which starts with a few kilobytes of stack: appending and encoding the
// entry takes some 10 KB, so the stack overflowed there and was copied
// with all the write's frames on it (2.5 % of the CPU at 1,000 busy
// conversations). Grown where the journal is updated, a few frames above
// the goroutine's start, the copy is of those few frames; a stack the
// collector shrank meanwhile is grown again there, not deep down.
const journalStackBytes = 12 << 10

// growJournalStack makes the calling goroutine's stack big enough to write
// a reply journal entry (see growRunStack).
//
//go:noinline
func growJournalStack() byte {
	var pad [journalStackBytes]byte
	return touch(pad[:])
}
