// Package cluster holds the coordination primitives the gateway needs to
// share work safely: an instance lock on the data directory, per-session
// leases with fencing tokens, inbound dedupe with a TTL, a durable inbox of
// accepted messages, a location index, sender budgets and outbound rates. This package
// provides the embedded (single-process) implementations: flock,
// in-process locks, a memory dedupe, an fsynced JSONL inbox, a
// group-committed JSONL index and in-memory token buckets (LocalInbox,
// LocalIndex, LocalDedupe, LocalBudget, LocalLocker, Rates). The
// interfaces the gateway is given and the optional abilities it finds on
// them, with what their errors mean, are in contract.go (Inbox, Dedupe,
// Budget, Index, Locker and Consumer, Watcher, Leaver, Beginner,
// Quarantiner, Syncer, SeenReserver, Admitter, LeaseProber,
// DeadlineLease, PermanentLease). cluster/rediscluster implements the same
// contract for cluster mode; both pass the suites of cluster/clustertest.
//
// cluster knows nothing about chat platforms, agents or sessions.
package cluster
