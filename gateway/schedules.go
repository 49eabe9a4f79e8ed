package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway/schedule"
)

// ScheduleSpec is a schedule from the configuration file.
type ScheduleSpec struct {
	// Name makes its ID ("cfg-NAME").
	Name string
	Cron string
	// TZ is an IANA zone; "" means the process's local zone.
	TZ       string
	Location chat.ConvRef
	// From is the user id (on Location's platform) the prompt comes from.
	From   string
	Prompt string
}

// schedules joins the scheduler to the gateway: /schedule creates and
// lists schedules, and a firing becomes a message from the schedule's
// creator fed through intake (access rules, dedupe, queue modes) with
// chat.Inbound.Schedule set, a typed origin no chat user can type. A
// firing whose creator lost access is skipped before anything is posted.
type schedules struct {
	s      *schedule.Scheduler
	log    *slog.Logger
	locker Locker
	// outage counts the lease's failures on an unreachable shared store
	// (cluster mode; nil otherwise).
	outage *outage
	tz     string
	// perUser caps the schedules a non-owner keeps (0: no cap).
	perUser int
	// allows is the access check without its side effects
	// (access.Checker.Allows); isOwner tells owners.
	allows  func(ctx context.Context, in chat.Inbound) (bool, error)
	isOwner func(p chat.Platform, user string) bool
	send    func(ctx context.Context, conv chat.ConvRef, out chat.Out) (chat.MsgRef, error)
	sink    func(ctx context.Context, in chat.Inbound) error
}

// defaultSchedulesPerUser is Config.SchedulesPerUser's default.
const defaultSchedulesPerUser = 10

// SchedulesLease is the lease under which one replica fires schedules (a
// leader role, which `pibot cluster status` shows as such).
const SchedulesLease = "schedules"

// schedulesReread is how often the replica holding the schedules lease
// reads schedules.json again for schedules another replica added.
const schedulesReread = 5 * time.Second

// wireSchedules opens DataDir/schedules.json and installs the configured
// schedules. In cluster mode the replicas share the file (every change is
// made under its lock) and the one firing reads it every schedulesReread.
func wireSchedules(g *Gateway) (*schedules, error) {
	x := &schedules{log: g.log, locker: g.locker, tz: g.cfg.ScheduleTZ, send: gatewayHost{g}.send,
		perUser: max(cmp.Or(g.cfg.SchedulesPerUser, defaultSchedulesPerUser), 0), allows: g.access.Allows, isOwner: g.access.IsOwner}
	opts := schedule.Options{Path: filepath.Join(g.cfg.DataDir, "schedules.json"), Fire: x.fire, Logger: g.log}
	if g.cfg.Cluster.Enabled {
		opts.Reread = schedulesReread
	}
	s, err := schedule.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	x.s = s
	var list []schedule.Schedule
	for _, sp := range g.cfg.Schedules {
		list = append(list, schedule.Schedule{ID: "cfg-" + sp.Name, Cron: sp.Cron, TZ: sp.TZ, Location: locationKey(sp.Location),
			Creator: sp.From, CreatorName: sp.From, Prompt: sp.Prompt})
	}
	if err := s.SetConfig(list); err != nil {
		return nil, fmt.Errorf("gateway: schedules: %w", err)
	}
	return x, nil
}

// locationKey is how a schedule stores its location.
func locationKey(c chat.ConvRef) string {
	b, _ := json.Marshal(c) //nolint:errchkjson // a struct of strings and a bool
	return string(b)
}

// fire posts a visible notice of the firing, then feeds the prompt to
// intake as a message from the creator (replying to the notice). The
// firing's key dedupes a repeat after a crash. A creator who lost access
// (revoked, or the group no longer listed) is told nothing and sent no
// pairing code: the firing is skipped and logged.
func (x *schedules) fire(ctx context.Context, f schedule.Firing) error {
	sc := f.Schedule
	conv, err := scheduleConv(sc)
	if err != nil {
		return err
	}
	in := firingInbound(sc, conv, f.Due)
	if ok, err := x.allows(ctx, in); !ok {
		x.log.Warn("schedule: its creator may not talk to the bot here; firing skipped", "id", sc.ID, "creator", sc.Creator,
			"conv", conv.Key(), "err", err)
		return nil
	}
	ref, err := x.send(ctx, conv, chat.Out{Markdown: fmt.Sprintf("⏰ Scheduled prompt `%s` from %s: %s", sc.ID, in.User.Name, sc.Prompt), Silent: true})
	if err != nil {
		x.log.Warn("schedule: notice not sent; the prompt runs anyway", "id", sc.ID, "err", err)
	}
	if ref.ID != "" {
		in.Msg = ref
	}
	return x.sink(ctx, in)
}

// scheduleConv is the conversation sc fires in.
func scheduleConv(sc schedule.Schedule) (chat.ConvRef, error) {
	var conv chat.ConvRef
	if err := json.Unmarshal([]byte(sc.Location), &conv); err != nil {
		return conv, fmt.Errorf("schedule %s: location: %w", sc.ID, err)
	}
	return conv, nil
}

// firingInbound is the message a firing of sc due at due sends in conv
// (its Msg is a stand-in until the notice is posted).
func firingInbound(sc schedule.Schedule, conv chat.ConvRef, due time.Time) chat.Inbound {
	name := cmp.Or(sc.CreatorName, sc.Creator)
	f := schedule.Firing{Schedule: sc, Due: due}
	return chat.Inbound{Kind: chat.KindMessage, Conv: conv, User: chat.User{ID: sc.Creator, Name: name},
		Msg:  chat.MsgRef{Conv: conv, ID: "schedule-" + sc.ID + "-" + fmt.Sprint(due.Unix())},
		Text: sc.Prompt, Mentioned: true, Schedule: sc.ID, DedupKey: f.Key(), Time: time.Now()}
}

// creatorAllowed reports whether sc's creator may still talk to the bot
// where it fires.
func (x *schedules) creatorAllowed(ctx context.Context, sc schedule.Schedule) bool {
	conv, err := scheduleConv(sc)
	if err != nil {
		return false
	}
	ok, _ := x.allows(ctx, firingInbound(sc, conv, sc.Next))
	return ok
}

// add stores a schedule made in chat by in's sender, within the cap of
// schedules a non-owner keeps (over all conversations of the platform).
func (x *schedules) add(in chat.Inbound, sc schedule.Schedule) (schedule.Schedule, error) {
	if x.perUser == 0 || x.isOwner(in.Conv.Platform, in.User.ID) {
		return x.s.Add(sc)
	}
	return x.s.AddIf(sc, func(all []schedule.Schedule) error {
		n := 0
		for _, o := range all {
			if c, err := scheduleConv(o); err == nil && !o.Config && o.Creator == in.User.ID && c.Platform == in.Conv.Platform {
				n++
			}
		}
		if n >= x.perUser {
			return fmt.Errorf("you keep %d schedules already, the most one person may; cancel one first", n)
		}
		return nil
	})
}

// run fires schedules while this replica holds the schedules lease (the
// local Locker always grants it), until ctx ends.
func (x *schedules) run(ctx context.Context) {
	retry := singletonRetryMin
	var fence int64
	for ctx.Err() == nil {
		lease, err := x.locker.Acquire(ctx, SchedulesLease, fence)
		if err != nil {
			if !errors.Is(err, cluster.ErrLeaseHeld) && ctx.Err() == nil {
				x.outage.report(x.log, "schedules lease", err)
			}
			if !sleepCtx(ctx, retry) {
				return
			}
			retry = min(2*retry, singletonRetryMax)
			continue
		}
		fence, retry = max(fence, lease.Fence()), singletonRetryMin
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = x.s.Run(runCtx)
		}()
		select {
		case <-done:
		case <-lease.Done():
			x.log.Warn("schedules lease lost; firing stopped here")
		}
		cancel()
		<-done
		release(context.WithoutCancel(ctx), x.log, lease)
	}
}

// cmdSchedule is /schedule: create (every …, in …, cron "…"), list, cancel.
func cmdSchedule(ctx context.Context, c *invocation) {
	x := c.cmds.schedules
	if x == nil {
		c.tell(ctx, "Schedules are not available here.")
		return
	}
	verb, rest, _ := strings.Cut(c.arg, " ")
	switch strings.ToLower(verb) {
	case "", "list":
		c.tell(ctx, "%s", x.listText(ctx, c.conv, c.cmds.rights.IsOwner(c.in.Conv.Platform, c.in.User.ID)))
	case "cancel":
		id := strings.TrimSpace(rest)
		owner := c.cmds.rights.IsOwner(c.in.Conv.Platform, c.in.User.ID)
		err := x.s.Cancel(id, func(sc schedule.Schedule) error {
			switch {
			case sc.Location != locationKey(c.conv) && !(owner && c.conv.DM && !x.creatorAllowed(ctx, sc)):
				// Not visible from here (an owner's DM lists the
				// stopped ones of everywhere).
				return schedule.ErrNotFound
			case sc.Config:
				return errors.New("it comes from the configuration file; remove it there")
			case sc.Creator != c.in.User.ID && !owner:
				return errors.New("only its creator or an owner may cancel it")
			}
			return nil
		})
		switch {
		case errors.Is(err, schedule.ErrNotFound):
			c.tell(ctx, "No schedule `%s` here. `/schedule list` shows them.", id)
		case err != nil:
			c.tell(ctx, "Cannot cancel `%s`: %v", id, err)
		default:
			c.say(ctx, "Cancelled schedule `%s`.", id)
		}
	default:
		req, err := schedule.Parse(c.arg, time.Now())
		if err != nil {
			c.tell(ctx, "%s\nUsage: %s", strings.TrimPrefix(err.Error(), "schedule: "), schedule.Usage)
			return
		}
		sc, err := x.add(c.in, schedule.Schedule{Cron: req.Cron, At: req.At, TZ: x.tz, Location: locationKey(c.conv),
			Creator: c.in.User.ID, CreatorName: c.in.User.Name, Prompt: req.Prompt})
		if err != nil {
			c.tell(ctx, "Cannot schedule that: %v", err)
			return
		}
		c.say(ctx, "Scheduled `%s` (%s), next at %s: %s", sc.ID, describe(sc), sc.Next.Format("Mon 2 Jan 15:04 MST"), sc.Prompt)
	}
}

// describe says when sc fires.
func describe(sc schedule.Schedule) string {
	if sc.Cron == "" {
		return "once"
	}
	return "cron `" + sc.Cron + "`"
}

// listText lists the schedules of conv. For an owner it marks those whose
// creator lost access (their firings are skipped), and in an owner's DM
// it adds such stopped schedules of every other location.
func (x *schedules) listText(ctx context.Context, conv chat.ConvRef, owner bool) string {
	here := locationKey(conv)
	var b strings.Builder
	// The key is what a schedule in the configuration file names.
	where := fmt.Sprintf("location `%s`, dm: %v", conv.Key(), conv.DM)
	list := x.s.List(here)
	if len(list) == 0 {
		b.WriteString("No schedules here (" + where + "). " + schedule.Usage)
	} else {
		b.WriteString("Schedules here (" + where + "):")
	}
	for _, sc := range list {
		b.WriteString("\n" + scheduleLine(sc))
		if owner && !x.creatorAllowed(ctx, sc) {
			b.WriteString(" " + stoppedMark)
		}
	}
	if !owner || !conv.DM {
		return b.String()
	}
	first := true
	for _, sc := range x.s.List("") {
		if sc.Location == here || x.creatorAllowed(ctx, sc) {
			continue
		}
		if first {
			b.WriteString("\n\nStopped schedules elsewhere (their creators may no longer talk to the bot there, so they do not fire; `/schedule cancel ID` here removes one):")
			first = false
		}
		at := sc.Location
		if c, err := scheduleConv(sc); err == nil {
			at = c.Key()
		}
		fmt.Fprintf(&b, "\n%s, at `%s`", scheduleLine(sc), at)
	}
	return b.String()
}

// stoppedMark follows a schedule whose creator lost access, for owners.
const stoppedMark = "⛔ stopped: its creator may no longer talk to the bot here, so it does not fire"

// scheduleLine is one schedule in a listing.
func scheduleLine(sc schedule.Schedule) string {
	return fmt.Sprintf("• `%s` %s, next %s, by %s: %s", sc.ID, describe(sc), sc.Next.Format("Mon 2 Jan 15:04 MST"), cmp.Or(sc.CreatorName, sc.Creator), sc.Prompt)
}
