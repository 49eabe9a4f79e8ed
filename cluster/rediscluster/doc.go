// Package rediscluster implements the cluster seams on Redis (go-redis v9),
// so that several pibot replicas can share the work: session leases with
// fencing tokens (Locker), inbound dedupe (Dedupe), the inbound per-sender
// budget (Budget), the outbound platform budget (Rates), the location index
// (Index), the keyed inbox (Inbox: a stream per key with a consumer
// group), and a pub/sub channel the replicas share (Topic). Each seam passes
// the conformance suite (cluster/clustertest) its embedded counterpart in
// package cluster passes. The shared pairing store
// lives in the subpackage redispairing, which knows access's types.
//
// Redis is the coordination layer, not the truth: a Redis that loses its
// data (a restart without AOF, a failover) never hands out a fence below
// the one the caller read from the session file, and every key is placed
// under one prefix (Options.Prefix) so two deployments can share a server.
// The package knows nothing of chats, sessions or agents: keys and values
// are opaque strings.
package rediscluster
