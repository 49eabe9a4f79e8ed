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

func TestValidateSchedules(t *testing.T) {
	good := Schedule{Name: "standup", Cron: "0 9 * * 1-5", Timezone: "UTC", Location: "telegram::42", DM: true, From: "42", Prompt: "p"}
	tests := []struct {
		name    string
		mod     func(*Schedule)
		wantKey string
	}{
		{"good", func(*Schedule) {}, ""},
		{"name", func(s *Schedule) { s.Name = "Stand Up" }, "schedules[0].name"},
		{"cron", func(s *Schedule) { s.Cron = "" }, "schedules[0].cron"},
		{"timezone", func(s *Schedule) { s.Timezone = "Mars/Olympus" }, "schedules[0].timezone"},
		{"location", func(s *Schedule) { s.Location = "telegram" }, "schedules[0].location"},
		{"from", func(s *Schedule) { s.From = "" }, "schedules[0].from"},
		{"prompt", func(s *Schedule) { s.Prompt = " " }, "schedules[0].prompt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			s := good
			tt.mod(&s)
			c.Schedules = []Schedule{s}
			err := c.Validate()
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("Validate() = %v, want it to name %q", err, tt.wantKey)
			}
		})
	}
	c := Default()
	c.Schedules = []Schedule{good, good}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "used twice") {
		t.Errorf("a name used twice: %v", err)
	}
}
