package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/session"
)

// acquireSession takes the lease of the session file at path, above the
// highest fence the file already holds: a lease store that lost its
// counter (Redis after a failover) must not hand out a fence the file's
// readers would ignore. It returns that highest fence too.
func (reg *registry) acquireSession(ctx context.Context, path string) (cluster.Lease, int64, error) {
	// Session files read lazily (a RangeStorage): a kept index of the file
	// (an evicted session) answers for what it indexed, and only the lines
	// appended since are read; else the index loaded to answer is the one
	// the Open that follows takes. The file is read once either way.
	var seen int64
	var err error
	if _, lazy := reg.files.(session.RangeStorage); lazy {
		seen, err = reg.indexes.HighestFence(reg.files, path)
	} else {
		seen, err = session.HighestFence(session.FileStorage{}, path)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("gateway: lease %s: %w", path, err)
	}
	lease, err := reg.locker.Acquire(ctx, path, seen)
	if err != nil {
		return nil, 0, fmt.Errorf("gateway: lease %s: %w", path, err)
	}
	crashpoint.Hit(crashpoint.Lease)
	return lease, seen, nil
}

// markTakeover writes the pibot.lease marker when s was opened under a
// lease whose fence is above every fence in the file (a new owner: another
// replica, or this one after a restart). The marker is durable before the
// owner writes anything else, so from then on readers ignore whatever a
// stale owner still appends with its lower fence.
func (reg *registry) markTakeover(s *session.Session, lease cluster.Lease, seen int64) error {
	if lease.Fence() <= seen {
		return nil // the fence this file already carries: not a takeover
	}
	data, err := json.Marshal(session.LeaseMarker{
		Fence:  lease.Fence(),
		Holder: reg.holder,
		Prev:   seen,
		At:     time.Now().UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return fmt.Errorf("gateway: lease marker: %w", err)
	}
	e := session.Entry{Type: session.TypeCustom, CustomType: session.CustomLease, Data: data, ParentID: s.Tree().Leaf()}
	if _, err := s.Append(e, session.SyncAlways); err != nil {
		return fmt.Errorf("gateway: lease marker: %w", err)
	}
	crashpoint.Hit(crashpoint.Fence)
	if seen > 0 {
		reg.metrics.takeover() // the file had an owner before (not a new session)
	}
	return nil
}

// holderID names this process in lease markers: host/pid.
func holderID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
}

// release gives a lease back, logging a failure (the lease then expires on
// its own in cluster mode). A store that cannot be reached is the
// outage's to log (cluster_outage.go): its failed releases are debug lines.
func release(ctx context.Context, log *slog.Logger, lease cluster.Lease) {
	if err := lease.Release(ctx); err != nil {
		if unreachable(err) {
			log.Debug("release lease; it expires on its own", "err", err)
			return
		}
		log.Warn("release lease", "err", err)
	}
}

// leaseLive reports whether lease may still be held. One that knows its
// deadline is as good as lost once the deadline has passed, even before
// its own timer ends it (a process that was frozen, say, wakes up with
// both due): a platform call, which no fence guards, checks this at the
// moment it goes out. A lease without a deadline (nil, or the local one)
// is live.
func leaseLive(lease cluster.Lease) bool {
	d, ok := lease.(cluster.DeadlineLease)
	return !ok || time.Now().Before(d.Deadline())
}

// leaseDone reports whether lease was lost or released (nil: never).
func leaseDone(lease cluster.Lease) bool {
	if lease == nil {
		return false
	}
	select {
	case <-lease.Done():
		return true
	default:
		return false
	}
}
