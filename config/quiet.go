package config

import (
	"fmt"
	"slices"
	"strings"
)

// Platforms are the chat platforms pibot has adapters for: the platform
// part of access.owners, access.users, access.groups and
// schedules[].location (a test in cmd/pibot keeps the list equal to the
// adapters').
func Platforms() []string { return []string{"telegram", "slack", "discord", "web", "term"} }

// validateQuiet checks the values that were accepted and then did
// something else than they say, without a word: a negative duration
// (taken as the default or as "none"), an owner on a platform pibot does
// not know (who then is no owner), a negative price, a Telegram webhook
// URL without webhook mode. Every problem names its key.
func (c Config) validateQuiet(bad func(key, format string, args ...any)) {
	a := c.Agent
	for _, d := range []struct {
		key, zero string
		v         Duration
	}{
		{"agent.idle_evict", "the default 10m", a.IdleEvict},
		{"agent.tool_timeout", "none", a.ToolTimeout},
		{"agent.approvals.timeout", "the default 10m", a.Approvals.Timeout},
		{"agent.queue.collect.debounce", "the default 500ms", a.Queue.Collect.Debounce},
		{"agent.retry.base_delay", "the default 2s", a.Retry.BaseDelay},
	} {
		if d.v < 0 {
			bad(d.key, "%s must not be negative (0: %s)", d.v.D(), d.zero)
		}
	}
	for name, p := range c.Providers {
		for i, t := range p.Script {
			if t.Delay < 0 {
				bad(fmt.Sprintf("providers.%s.script[%d].delay", name, i), "%s must not be negative", t.Delay.D())
			}
		}
		for i, m := range p.Models {
			mk := fmt.Sprintf("providers.%s.models[%d]", name, i)
			if m.Cost.Input < 0 || m.Cost.Output < 0 || m.Cost.CacheRead < 0 || m.Cost.CacheWrite < 0 {
				bad(mk+".cost", "prices must not be negative (US dollars per million tokens)")
			}
			for level := range m.ThinkingMap {
				if !slices.Contains(thinkingLevels, level) {
					bad(mk+".thinking_map."+level, "%q is not a thinking level (%s)", level, strings.Join(thinkingLevels, ", "))
				}
			}
		}
	}
	platform := func(key, entry string) {
		if p, _, ok := strings.Cut(entry, ":"); ok && p != "" && !slices.Contains(Platforms(), p) {
			bad(key, "%q: unknown platform %q (known: %s)", entry, p, strings.Join(Platforms(), ", "))
		}
	}
	for i, o := range c.Access.Owners {
		platform(fmt.Sprintf("access.owners[%d]", i), o)
	}
	for i, u := range c.Access.Users {
		platform(fmt.Sprintf("access.users[%d]", i), u)
	}
	for i, g := range c.Access.Groups {
		platform(fmt.Sprintf("access.groups[%d]", i), g)
	}
	for i, s := range c.Schedules {
		platform(fmt.Sprintf("schedules[%d].location", i), s.Location)
	}
	if tg := c.Adapter.Telegram; tg.WebhookURL != "" && tg.Mode != "webhook" {
		bad("adapters.telegram.webhook_url", "is set, but adapters.telegram.mode is %q, which does not use it: set mode: webhook (or remove webhook_url)", tg.Mode)
	}
}

// thinkingLevels are the values of agent.thinking.
var thinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh"}
