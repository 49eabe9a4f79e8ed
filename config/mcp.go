package config

import (
	"net/url"
	"strings"
)

// MCP configures the Model Context Protocol servers whose tools the agent
// gets, as "NAME__tool".
type MCP struct {
	// Servers maps a server name (letters, digits, - and _) to how to
	// reach it.
	Servers map[string]MCPServer `yaml:"servers"`
}

// MCPServer is one MCP server: a stdio command (command, args, env, cwd)
// or a streamable HTTP endpoint (url, headers). Values of env and headers
// are credentials: pibot removes them from its own environment and never
// logs them.
type MCPServer struct {
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env" secret:"value"`
	Cwd     string            `yaml:"cwd"`
	URL     string            `yaml:"url" secret:"url"`
	Headers map[string]string `yaml:"headers" secret:"value"`
}

// validate checks mcp.servers.*; every problem names its key.
func (m MCP) validate(bad func(key, format string, args ...any)) {
	for name, s := range m.Servers {
		key := "mcp.servers." + name
		if !isMCPName(name) || strings.Contains(name, "__") {
			bad(key, "server names are 1-32 letters, digits, - and _, without \"__\" (it separates server and tool in NAME__tool)")
		}
		switch {
		case s.Command == "" && s.URL == "":
			bad(key, "set command (a stdio server) or url (a streamable HTTP server)")
		case s.Command != "" && s.URL != "":
			bad(key, "set command (stdio) or url (streamable HTTP), not both")
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(key+".url", "%q is not an http(s) URL", s.URL)
			}
			if len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" {
				bad(key, "args, env and cwd are for stdio servers (command); an HTTP server takes url and headers")
			}
		default:
			if len(s.Headers) > 0 {
				bad(key+".headers", "headers are for HTTP servers (url); a stdio server takes env")
			}
		}
	}
}

// approvalTool reports whether tool names an MCP tool of a configured
// server ("NAME__tool" or "NAME__*"), the names agent.approvals accepts
// besides pibot's own tools.
func (m MCP) approvalTool(tool string) bool {
	server, rest, ok := strings.Cut(tool, "__")
	if !ok || rest == "" {
		return false
	}
	_, known := m.Servers[server]
	return known
}
