// Package binding picks the agent of a conversation: an ordered list of
// rules (config's bindings:), each naming an agent and the keys a place
// must have (platform, workspace, channel, dm, user, role). The most
// specific matching rule wins, a tie goes to the earlier rule, and a place
// no rule matches gets the default agent. Bindings only choose; access is
// decided before them, elsewhere.
package binding

import (
	"fmt"
	"slices"
	"strings"
)

// Default is the name of the default agent (config's agent: block).
const Default = "default"

// Rule is one binding. An empty key (nil DM) matches anything.
type Rule struct {
	Agent     string
	Platform  string
	Workspace string // Slack team, Discord guild
	Channel   string
	DM        *bool
	User      string
	Role      string // a Discord role id
}

// Place is where a message was sent, and by whom.
type Place struct {
	Platform  string
	Workspace string
	Channel   string
	DM        bool
	User      string
	Roles     []string
}

// The weight of each key in a rule's specificity: a rule naming a user
// beats any rule that does not, then channel, role, workspace, dm and
// platform, so that two rules tie only when they set the same keys.
const (
	weightPlatform = 1 << iota
	weightDM
	weightWorkspace
	weightRole
	weightChannel
	weightUser
)

// Specificity orders matching rules: the higher wins.
func (r Rule) Specificity() int {
	n := 0
	for _, k := range []struct {
		set bool
		w   int
	}{{r.Platform != "", weightPlatform}, {r.DM != nil, weightDM}, {r.Workspace != "", weightWorkspace},
		{r.Role != "", weightRole}, {r.Channel != "", weightChannel}, {r.User != "", weightUser}} {
		if k.set {
			n += k.w
		}
	}
	return n
}

// Matches reports whether every key r sets is p's. Platform names are
// compared without regard to case.
func (r Rule) Matches(p Place) bool {
	switch {
	case r.Platform != "" && !strings.EqualFold(r.Platform, p.Platform),
		r.Workspace != "" && r.Workspace != p.Workspace,
		r.Channel != "" && r.Channel != p.Channel,
		r.DM != nil && *r.DM != p.DM,
		r.User != "" && r.User != p.User,
		r.Role != "" && !slices.Contains(p.Roles, r.Role):
		return false
	}
	return true
}

// Keys describes the keys r sets, in the order of the file's keys
// ("platform=slack channel=C0OPS"); "(no keys)" for a rule that sets none.
func (r Rule) Keys() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("platform", r.Platform)
	add("workspace", r.Workspace)
	add("channel", r.Channel)
	if r.DM != nil {
		add("dm", fmt.Sprint(*r.DM))
	}
	add("user", r.User)
	add("role", r.Role)
	if len(parts) == 0 {
		return "(no keys)"
	}
	return strings.Join(parts, " ")
}

// Choice is the agent a place gets and why.
type Choice struct {
	Agent string
	// Rule is the index of the binding that chose it; -1: none matched.
	Rule int
	// Why says so in words ("bindings[1]: platform=slack channel=C0WEB").
	Why string
}

// Resolve returns the agent of p under rules.
func Resolve(rules []Rule, p Place) Choice {
	best, score := -1, -1
	for i, r := range rules {
		if s := r.Specificity(); r.Matches(p) && s > score {
			best, score = i, s
		}
	}
	if best < 0 {
		return Choice{Agent: Default, Rule: -1, Why: "no binding matches: the default agent"}
	}
	return Choice{Agent: rules[best].Agent, Rule: best, Why: fmt.Sprintf("bindings[%d]: %s", best, rules[best].Keys())}
}

// Shadow is a rule that can never be chosen: By, an earlier rule, matches
// every place Rule matches and is at least as specific.
type Shadow struct{ Rule, By int }

// Shadowed lists the rules an earlier rule always beats. Since a rule's
// specificity grows with every key it sets, an earlier rule covers a later
// one exactly when it sets the same keys to the same values.
func Shadowed(rules []Rule) []Shadow {
	var out []Shadow
	for j := range rules {
		for i := range j {
			if covers(rules[i], rules[j]) {
				out = append(out, Shadow{Rule: j, By: i})
				break
			}
		}
	}
	return out
}

// covers reports whether a matches every place b matches and wins over
// it when both match: a's keys are among b's, with b's values, and a is
// at least as specific.
func covers(a, b Rule) bool {
	same := func(x, y string) bool { return x == "" || x == y }
	dm := a.DM == nil || b.DM != nil && *a.DM == *b.DM
	return (a.Platform == "" || strings.EqualFold(a.Platform, b.Platform)) && same(a.Workspace, b.Workspace) &&
		same(a.Channel, b.Channel) && dm && same(a.User, b.User) && same(a.Role, b.Role) &&
		a.Specificity() >= b.Specificity()
}
