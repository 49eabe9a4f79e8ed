package gateway

import (
	"context"
	"errors"
	"log/slog"

	"github.com/pibot/pibot/session"
)

// durableAcks acknowledges the messages of an owner's runs to the inbox
// once the session file holding what they did is durable, and keeps them
// there when the file fails (Gateway.newOwner wires it).
type durableAcks struct {
	sess  *session.Session
	index Index
	log   *slog.Logger
	path  string // the session file's, for the log
	// done tells the inbox messages are done with (Gateway.ackAll).
	done func(ctx context.Context, ps []*pending)
	// failed is told of a failed write (health.storageFailed).
	failed func(err error)
	// strand keeps what a failed write stranded (health.strand).
	strand func(err error, ps []*pending)
}

// ack lets ps leave the inbox once the session holding what they
// did is durable. Their lines are written to the file at once (a crash of
// pibot keeps them) with the location index, which must be durable before
// any entry naming its locations is; the acknowledgement waits for the
// session's next fsync: its group commit (within Config.SessionGroupWindow),
// or any earlier Flush, SyncAlways append or Close. So the runs of one
// session share an fsync. If the session fails first (a full disk, a lost
// lease), ps stay in the inbox: a failed write strands them until the disk
// works again, a lost lease leaves them to the session's next holder.
func (d *durableAcks) ack(ctx context.Context, ps []*pending) {
	if err := errors.Join(d.sess.Write(), d.index.Sync(ctx)); err != nil {
		d.keep(err, ps)
		return
	}
	if len(ps) == 0 {
		return
	}
	d.sess.OnDurable(func(err error) {
		if err != nil {
			d.keep(err, ps)
			return
		}
		d.done(ctx, ps)
	})
}

// keep leaves ps in the inbox after the session failed to store their
// runs. A failed write makes the gateway degraded and strands them: they
// are routed again once a probe finds the disk writable.
func (d *durableAcks) keep(err error, ps []*pending) {
	var fe *session.FencedError
	if errors.As(err, &fe) && errors.Is(fe.Cause, errLeaseLost) {
		d.log.Info("session lease lost; its next holder takes the messages of its runs", "path", d.path)
		return
	}
	d.log.Error("flush session; keeping its messages in the inbox", "path", d.path, "err", err)
	if lostToStorage(d.sess, err) {
		// A full disk: taken up again once a probe finds it writable.
		d.failed(err)
		d.strand(err, ps)
	}
}
