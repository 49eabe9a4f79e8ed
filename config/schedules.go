package config

import (
	"fmt"
	"strings"
	"time"
)

// Schedule is a scheduled prompt from the configuration file: it fires
// as a message from From at Location whenever Cron says.
type Schedule struct {
	// Name identifies it (its id is "cfg-NAME" in /schedule list).
	Name string `yaml:"name"`
	// Cron is a five-field cron expression ("0 9 * * 1-5") or a
	// descriptor (@daily, @every 2h).
	Cron string `yaml:"cron"`
	// Timezone is an IANA zone (Europe/Berlin); "" means the process's.
	Timezone string `yaml:"timezone"`
	// Location is the conversation, as platform:workspace:channel[:thread]
	// (what /schedule list shows), and DM says it is a direct message.
	Location string `yaml:"location"`
	DM       bool   `yaml:"dm"`
	// From is the user id (on Location's platform) the prompt comes from;
	// the access rules apply to it as to a message they send.
	From   string `yaml:"from"`
	Prompt string `yaml:"prompt"`
}

// validateSchedules checks schedules[*] (the cron expression is checked
// where it is parsed, in cmd/pibot).
func validateSchedules(list []Schedule, bad func(key, format string, args ...any)) {
	seen := map[string]bool{}
	for i, s := range list {
		key := fmt.Sprintf("schedules[%d]", i)
		if !isScheduleName(s.Name) {
			bad(key+".name", "%q must be 1-32 characters of a-z, 0-9, _ and -", s.Name)
		} else if seen[s.Name] {
			bad(key+".name", "%q is used twice", s.Name)
		}
		seen[s.Name] = true
		if strings.TrimSpace(s.Cron) == "" {
			bad(key+".cron", "required (like \"0 9 * * 1-5\" or @daily)")
		}
		if s.Timezone != "" {
			if _, err := time.LoadLocation(s.Timezone); err != nil {
				bad(key+".timezone", "%q is not a time zone (like Europe/Berlin): %v", s.Timezone, err)
			}
		}
		if parts := strings.Split(s.Location, ":"); len(parts) < 3 || len(parts) > 4 || parts[0] == "" || parts[2] == "" {
			bad(key+".location", "%q is not platform:workspace:channel[:thread] (like telegram::123456789 or slack:T123:C456)", s.Location)
		}
		if s.From == "" {
			bad(key+".from", "required: the user id the prompt comes from")
		}
		if strings.TrimSpace(s.Prompt) == "" {
			bad(key+".prompt", "required")
		}
	}
}
