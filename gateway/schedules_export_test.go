package gateway

import (
	"context"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/schedule"
)

// FireSchedule fires schedule id now, as the scheduler does when it is due.
func FireSchedule(ctx context.Context, g *Gateway, id string) error {
	for _, sc := range g.sched.s.List("") {
		if sc.ID == id {
			return g.sched.fire(ctx, schedule.Firing{Schedule: sc, Due: sc.Next})
		}
	}
	return schedule.ErrNotFound
}

// AddSchedule stores a one-shot schedule in an hour by creator at conv.
func AddSchedule(g *Gateway, conv chat.ConvRef, creator, prompt string) (string, error) {
	return AddScheduleAt(g, conv, creator, prompt, time.Now().Add(time.Hour))
}

// AddScheduleAt stores a one-shot schedule at at by creator at conv.
func AddScheduleAt(g *Gateway, conv chat.ConvRef, creator, prompt string, at time.Time) (string, error) {
	sc, err := g.sched.s.Add(schedule.Schedule{At: at, Location: locationKey(conv), Creator: creator, Prompt: prompt})
	return sc.ID, err
}

// ScheduleIDs lists the stored schedules' ids.
func ScheduleIDs(g *Gateway) []string {
	var out []string
	for _, sc := range g.sched.s.List("") {
		out = append(out, sc.ID)
	}
	return out
}
