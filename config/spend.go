package config

import "math"

// SpendLimits are the daily spend caps (the top-level limits key): model
// usage per user, per conversation and for the whole bot, counted per UTC
// day. Not to be confused with agent.limits, the resource limits of one
// bash call.
type SpendLimits struct {
	PerUser         SpendCap `yaml:"per_user"`
	PerConversation SpendCap `yaml:"per_conversation"`
	Global          SpendCap `yaml:"global"`
}

// SpendCap caps one day's model usage. Zero disables a cap.
type SpendCap struct {
	// DailyUSD caps the cost in US dollars, priced with the model's cost
	// table (providers.*.models[].cost).
	DailyUSD float64 `yaml:"daily_usd"`
	// DailyTokens caps the tokens the model read and wrote (input,
	// output, cache reads and cache writes).
	DailyTokens int64 `yaml:"daily_tokens"`
}

// Enabled reports whether any cap is set.
func (l SpendLimits) Enabled() bool {
	return l.PerUser != (SpendCap{}) || l.PerConversation != (SpendCap{}) || l.Global != (SpendCap{})
}

// validate checks the caps set at key (limits, agents.NAME.spend); every
// problem names its key.
func (l SpendLimits) validate(key string, bad func(key, format string, args ...any)) {
	for name, c := range map[string]SpendCap{"per_user": l.PerUser, "per_conversation": l.PerConversation, "global": l.Global} {
		if c.DailyUSD < 0 || math.IsNaN(c.DailyUSD) || math.IsInf(c.DailyUSD, 0) {
			bad(key+"."+name+".daily_usd", "must be a non-negative number of US dollars (0: no cap)")
		}
		if c.DailyTokens < 0 {
			bad(key+"."+name+".daily_tokens", "must not be negative (0: no cap)")
		}
	}
}
