package config

import (
	"strings"
	"testing"
)

func TestValidateMCP(t *testing.T) {
	stdio := MCPServer{Command: "mcp-server"}
	tests := []struct {
		name    string
		mod     func(*Config)
		wantKey string // "" means valid
	}{
		{"stdio", func(c *Config) { c.MCP.Servers = map[string]MCPServer{"fs": stdio} }, ""},
		{"http", func(c *Config) {
			c.MCP.Servers = map[string]MCPServer{"docs": {URL: "https://h/mcp", Headers: map[string]string{"Authorization": "x"}}}
		}, ""},
		{"bad name", func(c *Config) { c.MCP.Servers = map[string]MCPServer{"a b": stdio} }, "mcp.servers.a b"},
		{"separator in name", func(c *Config) { c.MCP.Servers = map[string]MCPServer{"a__b": stdio} }, "mcp.servers.a__b"},
		{"neither", func(c *Config) { c.MCP.Servers = map[string]MCPServer{"x": {}} }, "mcp.servers.x"},
		{"both", func(c *Config) { c.MCP.Servers = map[string]MCPServer{"x": {Command: "a", URL: "https://h"}} }, "mcp.servers.x"},
		{"bad url", func(c *Config) { c.MCP.Servers = map[string]MCPServer{"x": {URL: "ftp://h"}} }, "mcp.servers.x.url"},
		{"headers on stdio", func(c *Config) {
			c.MCP.Servers = map[string]MCPServer{"x": {Command: "a", Headers: map[string]string{"A": "b"}}}
		}, "mcp.servers.x.headers"},
		{"env on http", func(c *Config) {
			c.MCP.Servers = map[string]MCPServer{"x": {URL: "https://h", Env: map[string]string{"A": "b"}}}
		}, "mcp.servers.x"},
		{"approval of a server tool", func(c *Config) {
			c.MCP.Servers = map[string]MCPServer{"fs": stdio}
			c.Agent.Approvals.Group["fs__write_file"] = "allow"
			c.Agent.Approvals.DM["fs__*"] = "ask"
		}, ""},
		{"approval of an unknown server", func(c *Config) { c.Agent.Approvals.Group["nope__x"] = "allow" }, "agent.approvals.group.nope__x"},
		{"approval policy of a server tool", func(c *Config) {
			c.MCP.Servers = map[string]MCPServer{"fs": stdio}
			c.Agent.Approvals.Group["fs__*"] = "maybe"
		}, "agent.approvals.group.fs__*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mod(&c)
			err := c.Validate()
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("Validate() = %v, want it to name %q", err, tt.wantKey)
			}
		})
	}
}
