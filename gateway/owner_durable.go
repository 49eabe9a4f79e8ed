package gateway

import (
	"context"
	"errors"

	"github.com/pibot/pibot/session"
)

// ackDurable lets ps leave the inbox once the session holding what they
// did is durable. Their lines are written to the file at once (a crash of
// pibot keeps them) with the location index, which must be durable before
// any entry naming its locations is; the acknowledgement waits for the
// session's next fsync: its group commit (within Config.SessionGroupWindow),
// or any earlier Flush, SyncAlways append or Close. So the runs of one
// session share an fsync. If the session fails first (a full disk, a lost
// lease), ps stay in the inbox: a failed write strands them until the disk
// works again, a lost lease leaves them to the session's next holder.
func (o *owner) ackDurable(ctx context.Context, ps []*pending) {
	if err := errors.Join(o.sess.Write(), o.index.Sync(ctx)); err != nil {
		o.keepInInbox(err, ps)
		return
	}
	if len(ps) == 0 {
		return
	}
	o.sess.OnDurable(func(err error) {
		if err != nil {
			o.keepInInbox(err, ps)
			return
		}
		o.ack(ctx, ps)
	})
}

// keepInInbox leaves ps in the inbox after the session failed to store
// their runs. A failed write makes the gateway degraded and strands them:
// they are routed again once a probe finds the disk writable.
func (o *owner) keepInInbox(err error, ps []*pending) {
	var fe *session.FencedError
	if errors.As(err, &fe) && errors.Is(fe.Cause, errLeaseLost) {
		o.log.Info("session lease lost; its next holder takes the messages of its runs", "path", o.path)
		return
	}
	o.log.Error("flush session; keeping its messages in the inbox", "path", o.path, "err", err)
	if lostToStorage(o.sess, err) {
		// A full disk: taken up again once a probe finds it writable.
		o.health.storageFailed(o, err)
		o.health.strand(err, ps)
	}
}
