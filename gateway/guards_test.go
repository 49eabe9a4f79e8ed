package gateway

import "github.com/pibot/pibot/cluster"

// The local cluster primitives are what cmd/pibot passes as the gateway's
// collaborators. crashCounter and syncer are found by type assertion, so
// without these guards a changed signature would silently turn off
// quarantine and the inbox health check.
var (
	_ Inbox        = (*cluster.Inbox)(nil)
	_ crashCounter = (*cluster.Inbox)(nil)
	_ syncer       = (*cluster.Inbox)(nil)
	_ Dedupe       = (*cluster.Dedupe)(nil)
	_ Budget       = (*cluster.Budget)(nil)
	_ Locker       = (*cluster.Locker)(nil)
	_ Index        = (*cluster.Index)(nil)
)
