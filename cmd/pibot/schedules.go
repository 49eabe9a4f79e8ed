package main

import (
	"fmt"
	"strings"

	// Time zones of schedules work in the container image too, which has
	// no zoneinfo files.
	_ "time/tzdata"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/schedule"
)

// scheduleSpecs maps schedules[*]; a cron expression the parser refuses
// is an error naming its key.
func scheduleSpecs(cfg config.Config) ([]gateway.ScheduleSpec, error) {
	var out []gateway.ScheduleSpec
	for i, s := range cfg.Schedules {
		if _, err := schedule.ParseCron(s.Cron); err != nil {
			return nil, &config.Error{Key: fmt.Sprintf("schedules[%d].cron", i), Msg: strings.TrimPrefix(err.Error(), "schedule: ")}
		}
		parts := strings.SplitN(s.Location, ":", 4)
		conv := chat.ConvRef{Platform: chat.Platform(parts[0]), Workspace: parts[1], Channel: parts[2], DM: s.DM}
		if len(parts) == 4 {
			conv.Thread = parts[3]
		}
		out = append(out, gateway.ScheduleSpec{Name: s.Name, Cron: s.Cron, TZ: s.Timezone, Location: conv, From: s.From, Prompt: s.Prompt})
	}
	return out, nil
}
