package gateway

import "strings"

// mcpSep separates an MCP server's name from its tool's name in the tool
// names the model sees ("github__create_issue"). pibot's own tools never
// contain it.
const mcpSep = "__"

// mcpServerOf returns the server of an MCP tool name, or "" for any other
// tool.
func mcpServerOf(tool string) string {
	server, rest, ok := strings.Cut(tool, mcpSep)
	if !ok || server == "" || rest == "" {
		return ""
	}
	return server
}

// mcpPolicy applies agent.approvals to an MCP tool: the tool's own entry,
// then its server's "NAME__*", then "*"; without any, MCP tools ask in
// groups (an operator-configured server may still do what a group member
// should not ask for) and are allowed in DMs. ok is false for tools that
// are not MCP tools.
func mcpPolicy(m map[string]string, dm bool, tool string) (policy string, ok bool) {
	server := mcpServerOf(tool)
	if server == "" {
		return "", false
	}
	for _, key := range []string{tool, server + mcpSep + "*", "*"} {
		if p, found := m[key]; found {
			return p, true
		}
	}
	if dm {
		return "allow", true
	}
	return "ask", true
}
