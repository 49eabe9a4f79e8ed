package gateway

import (
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
)

// The local cluster primitives are what cmd/pibot passes as the gateway's
// collaborators. crashCounter, beginner and syncer are found by type
// assertion, so without these guards a changed signature would silently
// turn off quarantine, the blame of crashes on what executed, and the
// inbox health check.
var (
	_ Inbox        = (*cluster.Inbox)(nil)
	_ crashCounter = (*cluster.Inbox)(nil)
	_ beginner     = (*cluster.Inbox)(nil)
	_ crashCounter = (*rediscluster.Inbox)(nil)
	_ beginner     = (*rediscluster.Inbox)(nil)
	_ syncer       = (*cluster.Inbox)(nil)
	_ Dedupe       = (*cluster.Dedupe)(nil)
	_ Budget       = (*cluster.Budget)(nil)
	_ Locker       = (*cluster.Locker)(nil)
	_ Index        = (*cluster.Index)(nil)
)
