package gateway

import (
	"context"
	"fmt"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/internal/otlp"
)

// A shared dedupe's key that Seen records is pending (cluster.Committer)
// until its event is committed: the intake commits the events it takes
// without an admission that does, and refuses, as in flight, a delivery
// that finds another's pending key.

// inFlight refuses in, whose dedupe key another delivery of the event
// recorded and has not committed (err wraps cluster.ErrInFlight): that
// delivery is being taken, or its replica died and the key expires soon.
// The platform delivers it again; nothing is forgotten (the key is not
// this delivery's) and the sender is not told of an outage.
func (i *intake) inFlight(in chat.Inbound, span *otlp.Span, err error) error {
	i.log.Debug("dedupe: another delivery of the event is in flight; refused for now", "key", in.DedupKey)
	span.Fail(err)
	return fmt.Errorf("gateway: dedupe: %w: %w", chat.ErrUnavailable, err)
}

// commit makes key ("": none), the dedupe key of an event taken without
// an admission that commits it (a command answered at intake, an item
// the local admission enqueued), live for the dedupe's TTL
// (cluster.Committer): a key Seen recorded is only pending. A failure is
// logged: the key then expires sooner, and a late redelivery of the
// event is handled again.
func (i *intake) commit(ctx context.Context, key string) {
	c, ok := i.dedupe.(cluster.Committer)
	if !ok || key == "" {
		return
	}
	if err := c.Commit(ctx, key); err != nil {
		i.outage.report(i.log, "dedupe: commit a taken event", err)
	}
}
