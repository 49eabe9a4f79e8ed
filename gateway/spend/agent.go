package spend

import (
	"fmt"
	"maps"
)

// AgentCaps are the caps of one agent's use (agents.NAME.spend): by one
// user (PerUser), in one conversation (PerConversation) and by everyone
// together (Global). They apply besides the gateway-wide caps: a run or
// call must fit both.
type AgentCaps struct {
	// Key is the config key the caps are set at ("agents.ops.spend"),
	// named in refusals.
	Key string
	Caps
}

// SetAgentCaps replaces the agents' caps, by agent name (a configuration
// reload); an agent not in m has none. Counts stay.
func (l *Limiter) SetAgentCaps(m map[string]AgentCaps) {
	m = maps.Clone(m)
	l.agents.Store(&m)
}

// agentCaps returns the caps of agent name (zero: none).
func (l *Limiter) agentCaps(name string) AgentCaps {
	if m := l.agents.Load(); m != nil && name != "" {
		return (*m)[name]
	}
	return AgentCaps{}
}

// agentWords describes the scope of an agent's cap in a sentence.
func agentWords(s Scope) string {
	switch s {
	case PerUser:
		return "for you"
	case PerConversation:
		return "for this conversation"
	default:
		return "for everyone's use of it"
	}
}

// capText describes cap c for Report: "no cap", "cap $2.00 and 100
// tokens".
func capText(c Cap) string {
	switch {
	case c == (Cap{}):
		return "no cap"
	case c.USD > 0 && c.Tokens > 0:
		return fmt.Sprintf("cap $%.2f and %d tokens", c.USD, c.Tokens)
	case c.USD > 0:
		return fmt.Sprintf("cap $%.2f", c.USD)
	default:
		return fmt.Sprintf("cap %d tokens", c.Tokens)
	}
}
