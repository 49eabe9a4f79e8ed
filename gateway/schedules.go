package gateway

import (
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
// chat.Inbound.Schedule set, a typed origin no chat user can type.
type schedules struct {
	s      *schedule.Scheduler
	log    *slog.Logger
	locker Locker
	tz     string
	send   func(ctx context.Context, conv chat.ConvRef, out chat.Out) (chat.MsgRef, error)
	sink   func(ctx context.Context, in chat.Inbound) error
}

// schedulesLease is the lease under which one replica fires schedules.
const schedulesLease = "schedules"

// schedulesReread is how often the replica holding the schedules lease
// reads schedules.json again for schedules another replica added.
const schedulesReread = 5 * time.Second

// wireSchedules opens DataDir/schedules.json and installs the configured
// schedules. In cluster mode the replicas share the file (every change is
// made under its lock) and the one firing reads it every schedulesReread.
func wireSchedules(g *Gateway) (*schedules, error) {
	x := &schedules{log: g.log, locker: g.locker, tz: g.cfg.ScheduleTZ, send: gatewayHost{g}.send}
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
// firing's key dedupes a repeat after a crash.
func (x *schedules) fire(ctx context.Context, f schedule.Firing) error {
	var conv chat.ConvRef
	if err := json.Unmarshal([]byte(f.Schedule.Location), &conv); err != nil {
		return fmt.Errorf("schedule %s: location: %w", f.Schedule.ID, err)
	}
	name := f.Schedule.CreatorName
	if name == "" {
		name = f.Schedule.Creator
	}
	ref, err := x.send(ctx, conv, chat.Out{Markdown: fmt.Sprintf("⏰ Scheduled prompt `%s` from %s: %s", f.Schedule.ID, name, f.Schedule.Prompt), Silent: true})
	if err != nil {
		x.log.Warn("schedule: notice not sent; the prompt runs anyway", "id", f.Schedule.ID, "err", err)
	}
	in := chat.Inbound{Kind: chat.KindMessage, Conv: conv, Msg: ref, User: chat.User{ID: f.Schedule.Creator, Name: name},
		Text: f.Schedule.Prompt, Mentioned: true, Schedule: f.Schedule.ID, DedupKey: f.Key(), Time: time.Now()}
	if ref.ID == "" {
		in.Msg = chat.MsgRef{Conv: conv, ID: "schedule-" + f.Schedule.ID + "-" + fmt.Sprint(f.Due.Unix())}
	}
	return x.sink(ctx, in)
}

// run fires schedules while this replica holds the schedules lease (the
// local Locker always grants it), until ctx ends.
func (x *schedules) run(ctx context.Context) {
	retry := singletonRetryMin
	var fence int64
	for ctx.Err() == nil {
		lease, err := x.locker.Acquire(ctx, schedulesLease, fence)
		if err != nil {
			if !errors.Is(err, cluster.ErrLeaseHeld) && ctx.Err() == nil {
				x.log.Warn("schedules lease", "err", err)
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
		c.tell(ctx, "%s", x.listText(c.conv))
	case "cancel":
		id := strings.TrimSpace(rest)
		err := x.s.Cancel(id, func(sc schedule.Schedule) error {
			switch {
			case sc.Location != locationKey(c.conv):
				return schedule.ErrNotFound // not visible from here
			case sc.Config:
				return errors.New("it comes from the configuration file; remove it there")
			case sc.Creator != c.in.User.ID && !c.cmds.rights.IsOwner(c.in.Conv.Platform, c.in.User.ID):
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
		sc, err := x.s.Add(schedule.Schedule{Cron: req.Cron, At: req.At, TZ: x.tz, Location: locationKey(c.conv),
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

// listText lists the schedules of conv.
func (x *schedules) listText(conv chat.ConvRef) string {
	list := x.s.List(locationKey(conv))
	// The key is what a schedule in the configuration file names.
	here := fmt.Sprintf("location `%s`, dm: %v", conv.Key(), conv.DM)
	if len(list) == 0 {
		return "No schedules here (" + here + "). " + schedule.Usage
	}
	var b strings.Builder
	b.WriteString("Schedules here (" + here + "):")
	for _, sc := range list {
		who := sc.CreatorName
		if who == "" {
			who = sc.Creator
		}
		fmt.Fprintf(&b, "\n• `%s` %s, next %s, by %s: %s", sc.ID, describe(sc), sc.Next.Format("Mon 2 Jan 15:04 MST"), who, sc.Prompt)
	}
	return b.String()
}
