package gateway

import (
	"context"
	"strconv"
	"strings"

	"github.com/pibot/pibot/gateway/spend"
)

// limitsUsage is /limits' usage line.
const limitsUsage = "Usage: `/limits` shows today's spend; owners: `/limits lift user ID|conversation|global` or `/limits raise user ID|conversation|global $USD|TOKENS` (for the rest of today, UTC)."

// cmdLimits shows today's spend against the daily caps; owners lift or
// raise a cap for the rest of the UTC day. (In groups the rights check
// lets only owners past with arguments; in DMs, where everyone may use
// every command of their own conversation, the handler checks.)
func cmdLimits(ctx context.Context, c *invocation) {
	lim := c.cmds.spend.lim
	if lim == nil {
		c.tell(ctx, "No spend caps are configured (the `limits` section of the config file).")
		return
	}
	in := c.in
	me := spendWho(c.conv, in.User.ID)
	owner := c.cmds.rights.IsOwner(in.Conv.Platform, in.User.ID)
	if c.arg == "" {
		// Where sessions have agents, their use of this conversation's agent.
		at := in
		at.Conv = c.conv
		if o, _ := c.cmds.sessions.existing(ctx, at); o != nil && o.cfg.Route != nil {
			me.Agent = o.agentRec().Name
		}
		rep, err := lim.Report(ctx, me)
		if err != nil {
			c.failed(ctx, "reading today's spend", err)
			return
		}
		if owner {
			rep += "\nYou are an owner: the caps do not apply to you."
		}
		c.tell(ctx, "%s", rep)
		return
	}
	if !owner {
		c.tell(ctx, "Only an owner of this bot can lift or raise a spend cap.")
		return
	}
	f := strings.Fields(c.arg)
	if len(f) < 2 || f[0] != "lift" && f[0] != "raise" {
		c.tell(ctx, "%s", limitsUsage)
		return
	}
	scope, ok := spend.ParseScope(f[1])
	if !ok {
		c.tell(ctx, "%s", limitsUsage)
		return
	}
	rest := f[2:]
	who := me
	if scope == spend.PerUser {
		if len(rest) == 0 {
			c.tell(ctx, "Name the user: `/limits %s user ID` (the id /whoami shows them).", f[0])
			return
		}
		who = spendWho(c.conv, rest[0])
		rest = rest[1:]
	}
	var o spend.Override
	switch {
	case f[0] == "lift" && len(rest) == 0:
		o.Lifted = true
	case f[0] == "raise" && len(rest) == 1:
		cp, ok := parseCap(rest[0])
		if !ok {
			c.tell(ctx, "`%s` is not an amount: write `$5` (US dollars) or `200000` (tokens).", rest[0])
			return
		}
		o.Cap = cp
	default:
		c.tell(ctx, "%s", limitsUsage)
		return
	}
	if err := lim.Override(ctx, who, scope, o); err != nil {
		c.failed(ctx, "changing the cap", err)
		return
	}
	c.cmds.log.Info("spend cap changed for today", "by", in.User.ID, "scope", string(scope), "user", who.User, "conv", who.Conv, "lifted", o.Lifted)
	what := "lifted"
	if !o.Lifted {
		what = "raised to " + rest[0]
	}
	c.say(ctx, "The %s spend cap is %s until 00:00 UTC.", scope, what)
}

// parseCap reads "$5" / "5usd" as dollars and "200000" / "200k" as tokens.
func parseCap(s string) (spend.Cap, bool) {
	s = strings.ToLower(s)
	if v, ok := strings.CutPrefix(s, "$"); ok {
		s = v + "usd"
	}
	if v, ok := strings.CutSuffix(s, "usd"); ok {
		d, err := strconv.ParseFloat(v, 64)
		if err != nil || d <= 0 || d > 1e9 {
			return spend.Cap{}, false
		}
		return spend.Cap{USD: d}, true
	}
	s = strings.TrimSuffix(s, "tokens")
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1_000, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mult, s = 1_000_000, strings.TrimSuffix(s, "m")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > 1e15/mult {
		return spend.Cap{}, false
	}
	return spend.Cap{Tokens: n * mult}, true
}
