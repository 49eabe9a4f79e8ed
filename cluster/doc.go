// Package cluster holds the coordination primitives the gateway needs to
// share work safely: an instance lock on the data directory, per-session
// leases with fencing tokens, inbound dedupe with a TTL, a durable inbox of
// accepted messages, a location index, sender budgets and outbound rates. This package
// provides the embedded (single-process) implementations: flock,
// in-process locks, a memory dedupe, an fsynced JSONL inbox, a
// group-committed JSONL index and in-memory token buckets. Redis-backed
// implementations for cluster mode satisfy the same gateway interfaces.
//
// cluster knows nothing about chat platforms, agents or sessions.
package cluster
