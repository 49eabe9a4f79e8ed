package gateway

import (
	"context"

	"github.com/pibot/pibot/cluster"
)

// admission is the last step of intake.sink: a screened, classified event
// becomes an inbox item. It has two implementations: the local one asks
// the dedupe, the sender's budget and the inbox one by one; the shared
// one (cluster mode, cluster_admit.go) does all three in one round trip to Redis
// and the pump hands the item on.
type admission interface {
	// admit enqueues ad.Data at ad.Key unless ad.Dedupe ("": none) was
	// seen (Dup) or ad.Budget's sender ("": not budgeted) is over budget
	// (Wait > 0), and hands the new item (item, as ad.Data encodes it)
	// on to be executed. ad.Seen names the dedupe key a step before
	// recorded. An error with an ID: the item was enqueued, but is not
	// known durable.
	admit(ctx context.Context, ad cluster.Admission, item inboxItem) (cluster.Admitted, error)
	// oneTrip reports whether admit asks the dedupe, the budget and the
	// inbox in one round trip: sink then admits an item known as it came
	// whole (intake.admitDirect). Otherwise sink takes the dedupe and the
	// budget as steps of their own, before it classifies, and admits the
	// item it decided with neither.
	oneTrip() bool
}

// admission returns i's admission: shared when the dedupe admits in one
// round trip (cluster mode with Redis), local otherwise.
func (i *intake) admission() admission {
	if i.admit != nil {
		return sharedAdmission{store: i.admit}
	}
	return localAdmission{i}
}

// localAdmission admits through the intake's Dedupe, Budget and Inbox,
// one call each, and hands the item on itself: to its mailbox, or to the
// intake's accepted (cluster mode without a one-trip store: the pump).
type localAdmission struct{ i *intake }

func (a localAdmission) admit(ctx context.Context, ad cluster.Admission, item inboxItem) (cluster.Admitted, error) {
	i := a.i
	if ad.Dedupe != "" {
		dup, err := i.dedupe.Seen(ctx, ad.Dedupe)
		if err != nil || dup {
			return cluster.Admitted{Dup: dup}, err
		}
	}
	if ad.Budget != "" {
		wait, err := i.budget.Reserve(ctx, ad.Budget)
		switch {
		case err != nil:
			// A budget that cannot be asked does not stop messages.
			i.log.Warn("sender budget unavailable; message let through", "err", err)
		case wait > 0:
			return cluster.Admitted{Wait: wait}, nil
		}
	}
	id, durable, err := i.inbox.Enqueue(ctx, ad.Key, ad.Data)
	if err != nil {
		return cluster.Admitted{}, err
	}
	// The run may start while the inbox fsync is in flight; the platform
	// hears "received" only once the message is durable.
	ref := inboxRef{key: ad.Key, id: id}
	if i.accepted != nil {
		i.accepted(ref, item)
	} else {
		i.post(ref, item, false)
	}
	if err := durable(); err != nil {
		return cluster.Admitted{ID: id}, err
	}
	// The key a step before recorded (pending, in a shared dedupe) now
	// names an enqueued event.
	i.commit(ctx, ad.Seen)
	return cluster.Admitted{ID: id}, nil
}

func (localAdmission) oneTrip() bool { return false }

// sharedAdmission admits in one round trip to the shared store
// (pump.admit over rediscluster.Admission.Admit); the pump hands the item
// on, to this replica's mailbox if it holds the session.
type sharedAdmission struct {
	store func(ctx context.Context, ad cluster.Admission, item inboxItem) (cluster.Admitted, error)
}

func (a sharedAdmission) admit(ctx context.Context, ad cluster.Admission, item inboxItem) (cluster.Admitted, error) {
	return a.store(ctx, ad, item)
}

func (sharedAdmission) oneTrip() bool { return true }
