package main

import (
	"errors"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/config"
)

func TestScheduleSpecs(t *testing.T) {
	cfg := config.Config{Schedules: []config.Schedule{
		{Name: "standup", Cron: "0 9 * * 1-5", Timezone: "Europe/Berlin", Location: "slack:T1:C2:171.5", From: "U1", Prompt: "p"},
		{Name: "dm", Cron: "@daily", Location: "telegram::42", DM: true, From: "42", Prompt: "q"},
	}}
	got, err := scheduleSpecs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := (chat.ConvRef{Platform: "slack", Workspace: "T1", Channel: "C2", Thread: "171.5"}); got[0].Location != want || got[0].TZ != "Europe/Berlin" {
		t.Errorf("spec 0 = %+v", got[0])
	}
	if want := (chat.ConvRef{Platform: "telegram", Channel: "42", DM: true}); got[1].Location != want || got[1].From != "42" {
		t.Errorf("spec 1 = %+v", got[1])
	}
	cfg.Schedules[1].Cron = "61 * * * *"
	var ce *config.Error
	if _, err := scheduleSpecs(cfg); !errors.As(err, &ce) || ce.Key != "schedules[1].cron" {
		t.Fatalf("bad cron: %v, want an error naming schedules[1].cron", err)
	}
}
