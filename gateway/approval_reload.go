package gateway

// SetApprovals replaces the per-tool approval policies of DMs and groups
// (agent.approvals.dm and .group) while the gateway runs: a configuration
// reload. Calls already waiting for a decision keep waiting; the next
// tool call is checked against the new policies.
func (g *Gateway) SetApprovals(dm, group map[string]string) {
	g.approval.setTables(dm, group)
}

// SetAgentApprovals replaces the per-tool approval policies of the named
// agents (each [2]: DM, group); names of no agent are ignored. The
// default agent's are SetApprovals'.
func (g *Gateway) SetAgentApprovals(byAgent map[string][2]map[string]string) {
	g.approval.setAgentTables(byAgent)
}
