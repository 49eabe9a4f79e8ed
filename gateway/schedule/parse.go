// Package schedule keeps scheduled prompts: recurring ones (a cron
// expression in a time zone) and one-shot ones ("in 2h"), stored durably
// in one JSON file written atomically, and fired by a Scheduler through a
// function the gateway provides (which feeds the prompt through its normal
// intake as a typed origin, never as user-typed text). Processes may share
// the file: each change is made under its lock to what it holds then, and
// an occurrence is recorded, and so fired, once between them.
//
// A firing missed while pibot was down runs once at start, not once per
// missed occurrence. Cron expressions are parsed with robfig/cron's parser
// (its scheduler is not used).
package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// parser accepts standard five-field cron expressions and the
// descriptors (@daily, @every 2h).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron checks a cron expression and returns its schedule.
func ParseCron(expr string) (cron.Schedule, error) {
	s, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("schedule: cron %q: %w", expr, err)
	}
	return s, nil
}

// Request is what a /schedule command asks for.
type Request struct {
	// Cron is set for a recurring schedule.
	Cron string
	// At is set for a one-shot schedule.
	At     time.Time
	Prompt string
}

var weekdays = map[string]string{
	"sunday": "0", "monday": "1", "tuesday": "2", "wednesday": "3", "thursday": "4", "friday": "5", "saturday": "6",
	"sun": "0", "mon": "1", "tue": "2", "wed": "3", "thu": "4", "fri": "5", "sat": "6",
}

// Usage explains the forms Parse accepts.
const Usage = "`/schedule every weekday 09:00 PROMPT`, `/schedule every day 18:30 PROMPT`, " +
	"`/schedule every monday 08:00 PROMPT`, `/schedule every 2h PROMPT`, `/schedule cron \"0 9 * * 1-5\" PROMPT`, " +
	"`/schedule in 2h PROMPT`, `/schedule list`, `/schedule cancel ID`"

// Parse reads the text after "/schedule every" or "/schedule in" forms:
//
//	every day|weekday|weekend|monday..sunday HH:MM PROMPT
//	every 30m|2h PROMPT
//	cron "M H DOM MON DOW" PROMPT
//	in 90s|45m|2h|1d PROMPT
//
// now is the current time (for "in").
func Parse(text string, now time.Time) (Request, error) {
	f := strings.Fields(text)
	if len(f) < 2 {
		return Request{}, fmt.Errorf("schedule: want one of %s", Usage)
	}
	switch strings.ToLower(f[0]) {
	case "in":
		d, err := parseDuration(f[1])
		if err != nil {
			return Request{}, err
		}
		return withPrompt(Request{At: now.Add(d)}, f[2:])
	case "every":
		what := strings.ToLower(f[1])
		if d, err := parseDuration(what); err == nil {
			if d < time.Minute {
				return Request{}, fmt.Errorf("schedule: every %s is too often (at least 1m)", what)
			}
			return withPrompt(Request{Cron: "@every " + d.String()}, f[2:])
		}
		if len(f) < 3 {
			return Request{}, fmt.Errorf("schedule: want every day|weekday|weekend|MONDAY HH:MM PROMPT")
		}
		hh, mm, err := parseClock(f[2])
		if err != nil {
			return Request{}, err
		}
		var dow string
		switch {
		case what == "day":
			dow = "*"
		case what == "weekday":
			dow = "1-5"
		case what == "weekend":
			dow = "0,6"
		case weekdays[what] != "":
			dow = weekdays[what]
		default:
			return Request{}, fmt.Errorf("schedule: %q is not day, weekday, weekend, a day of the week or an interval like 2h", what)
		}
		return withPrompt(Request{Cron: fmt.Sprintf("%d %d * * %s", mm, hh, dow)}, f[3:])
	case "cron":
		rest := strings.TrimSpace(text[strings.Index(text, f[0])+len(f[0]):])
		if !strings.HasPrefix(rest, `"`) {
			return Request{}, fmt.Errorf(`schedule: write the cron expression in quotes: cron "0 9 * * 1-5" PROMPT`)
		}
		expr, prompt, ok := strings.Cut(rest[1:], `"`)
		if !ok {
			return Request{}, fmt.Errorf("schedule: the cron expression's closing quote is missing")
		}
		if _, err := ParseCron(expr); err != nil {
			return Request{}, err
		}
		return withPrompt(Request{Cron: expr}, strings.Fields(prompt))
	}
	return Request{}, fmt.Errorf("schedule: want one of %s", Usage)
}

func withPrompt(r Request, words []string) (Request, error) {
	r.Prompt = strings.Join(words, " ")
	if r.Prompt == "" {
		return Request{}, fmt.Errorf("schedule: the prompt is missing")
	}
	if r.Cron != "" {
		if _, err := ParseCron(r.Cron); err != nil {
			return Request{}, err
		}
	}
	return r, nil
}

// parseDuration reads 90s, 45m, 2h, 1d (and Go durations like 1h30m).
func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err == nil && days > 0 && days <= 366 {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("schedule: %q is not a duration like 30m, 2h or 1d", s)
	}
	return d, nil
}

// parseClock reads HH:MM.
func parseClock(s string) (h, m int, err error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, 0, fmt.Errorf("schedule: %q is not a time like 09:00", s)
	}
	return t.Hour(), t.Minute(), nil
}
