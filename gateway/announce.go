package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/access"
)

// PairingNotices lists the users approved by `pibot pairing approve` who
// have not yet been told (access.Store). The CLI only writes the pairing
// file; the running gateway notices the approval here and tells the user
// in the conversation where they asked for their code.
type PairingNotices interface {
	Untold(ctx context.Context) ([]access.Pairing, error)
	MarkTold(ctx context.Context, platform, user string) error
}

var _ PairingNotices = (*access.Store)(nil)

// Announcements of approvals.
const (
	// announceEvery is how often the pairing store is looked at (a stat
	// of the file when nothing changed).
	announceEvery = 2 * time.Second
	// announceTries is how many failed sends give up on telling a user
	// (who blocked the bot, or whose conversation is gone).
	announceTries = 5
	// approvedText is what an approved user is told.
	approvedText = "You're approved: you can talk to me now."
)

// announcer tells approved users that they may talk now.
type announcer struct {
	notices  PairingNotices
	adapters map[chat.Platform]chat.Adapter
	log      *slog.Logger
	failed   map[string]int // sends failed so far, by platform:user
}

// loop announces approvals until ctx ends.
func (a *announcer) loop(ctx context.Context) {
	t := time.NewTicker(announceEvery)
	defer t.Stop()
	for {
		a.announce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// announce tells every untold approved user, once.
func (a *announcer) announce(ctx context.Context) {
	ps, err := a.notices.Untold(ctx)
	if err != nil {
		a.log.Warn("pairing: read approvals", "err", err)
		return
	}
	for _, p := range ps {
		ad := a.adapters[chat.Platform(p.Platform)]
		if ad == nil || p.Conv == nil || p.Conv.Platform != chat.Platform(p.Platform) {
			continue // the platform runs elsewhere, or is not configured
		}
		key := p.Platform + ":" + p.User
		if _, err := ad.Send(ctx, *p.Conv, chat.Out{Markdown: approvedText}); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.failed[key]++
			if a.failed[key] < announceTries {
				a.log.Warn("pairing: tell approved user", "user", key, "err", err)
				continue
			}
			a.log.Warn("pairing: could not tell the approved user; giving up", "user", key, "err", err)
		}
		delete(a.failed, key)
		if err := a.notices.MarkTold(ctx, p.Platform, p.User); err != nil {
			a.log.Warn("pairing: record approval told", "user", key, "err", err)
		}
	}
}
