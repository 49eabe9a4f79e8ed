// Package fsync makes the appended data of a file durable without holding
// up the goroutines its caller has just handed work to.
//
// A goroutine blocked in a system call keeps its P (the scheduler's
// processor) until the call returns or the runtime's monitor takes the P
// back, which can be 10 ms later. Goroutines readied on that P just before
// the call (runnext, the local run queue) wait for the disk with it, and
// an idle P running the collector's idle mark worker does not steal them.
// pibot hands an inbound message to its mailbox and then waits for the
// inbox's fsync, so at 1,000 busy conversations the message's run waited
// for that fsync: the p99 from message to provider request was 3.6–9.8 ms,
// and with the yield 0.6–0.9 ms (gateway BenchmarkConcurrentConversations).
package fsync

import (
	"os"
	"runtime"
)

// Data flushes f's data and size to disk (fdatasync where the system has
// it: an append-only file needs those, not its timestamps). It first lets
// the goroutines waiting on this P run, so that they are not held up by
// the disk.
func Data(f *os.File) error {
	return afterOthers(func() error { return datasync(f) })
}

// afterOthers yields the P, so that the goroutines readied on it run
// first, then calls sync.
func afterOthers(sync func() error) error {
	runtime.Gosched()
	return sync()
}
