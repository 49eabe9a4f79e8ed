package gateway

import "context"

// idleHeld returns the keys among keys (those poll n lists) whose session
// this replica holds and that a take would hand nothing now, asked of the
// inbox in one round trip for all of them (cluster.Peeker): the poll
// leaves them alone. A held key's items come with this replica's own
// admissions and the inbox's notices; the poll's look at them every
// heldEvery polls (a claim every claimEvery) is there for what those
// missed, and a key whose items are all in hand (a run in progress) has
// nothing for it. Taking each held key to find out cost a round trip per
// run in progress, in a burst every second (issue #34). nil (every held
// key is looked at as before): an inbox that cannot peek, a poll that
// does not look at held keys (polled), none held, or a failed peek.
func (p *pump) idleHeld(ctx context.Context, keys []string, n int) map[string]bool {
	if p.peek == nil || p.watch != nil && n%heldEvery != 0 {
		return nil
	}
	var held []string
	for _, k := range keys {
		if p.sessions.cached(k) != nil {
			held = append(held, k)
		}
	}
	if len(held) == 0 {
		return nil
	}
	takeable, err := p.peek.Takeable(ctx, held, n%claimEvery == 0)
	if err != nil {
		// The takes that follow say what is wrong (and a take repairs a
		// key of the wrong shape, which fails the peek).
		p.log.Debug("inbox: peek at the sessions held here; taking each", "err", err)
		return nil
	}
	idle := make(map[string]bool, len(held))
	for _, k := range held {
		idle[k] = true
	}
	for _, k := range takeable {
		delete(idle, k)
	}
	return idle
}
