package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pibot/pibot/config"
)

// mcpServerEnv makes the test binary a stdio MCP server (TestMain).
const mcpServerEnv = "PIBOT_TEST_MCP_SERVER"

type noArgs struct{}

// newTestMCPServer has one tool, environ, which prints the server's
// environment.
func newTestMCPServer() *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "probe", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "environ", Description: "Prints the server's environment."},
		func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
			env := os.Environ()
			sort.Strings(env)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ENV:" + strings.Join(env, ";")}}}, nil, nil
		})
	return srv
}

func runTestMCPServer() int {
	if err := newTestMCPServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A stdio MCP server gets pibot's scrubbed environment plus its own env:
// its credential arrives, pibot's provider keys do not; the model calls
// its tool as probe__environ.
func TestMCPStdioServerEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const (
		providerKey = "sk-SECRET-provider-1b2c3d4e"
		serverToken = "tok-SERVER-9f8e7d6c"
	)
	yaml := `data_dir: ./data
agent:
  model: f/m
providers:
  f:
    api: faux
    api_key: ${PIBOT_TEST_FAUX_KEY}
    models: [{id: m}]
    script:
      - tool_calls:
          - name: probe__environ
            args: {}
      - text: done
mcp:
  servers:
    probe:
      command: ` + os.Args[0] + `
      args: ["-test.run=^$"]
      env: {` + mcpServerEnv + `: "1", PROBE_TOKEN: "${PROBE_TOKEN}"}
`
	writeFile(t, dir, "c.yaml", yaml)
	r := pibot(t, dir, "", []string{"PIBOT_TEST_FAUX_KEY=" + providerKey, "PROBE_TOKEN=" + serverToken, "OPENAI_API_KEY=sk-SECRET-openai"},
		"chat", "--mode", "json", "-c", "c.yaml", "show the environment")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %.3000s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "ENV:") {
		t.Fatalf("the MCP tool did not run: %.3000s", r.stdout)
	}
	if !strings.Contains(r.stdout, "PROBE_TOKEN="+serverToken) {
		t.Errorf("the server's own env did not reach it: %.3000s", r.stdout)
	}
	if !strings.Contains(r.stdout, "HOME="+dir) {
		t.Errorf("pibot's environment did not reach the server: %.3000s", r.stdout)
	}
	if strings.Contains(r.stdout, "sk-SECRET") {
		t.Errorf("pibot's secrets reached the MCP server: %.3000s", r.stdout)
	}
}

// pibot mcp list shows each server's state and tools: a stdio one, an
// HTTP one (with its header) and one that cannot start.
func TestMCPList(t *testing.T) {
	t.Parallel()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return newTestMCPServer() }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != "hdr-value-123" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", `data_dir: ./data
mcp:
  servers:
    local:
      command: `+os.Args[0]+`
      args: ["-test.run=^$"]
      env: {`+mcpServerEnv+`: "1"}
    remote:
      url: `+ts.URL+`
      headers: {X-Token: hdr-value-123}
    broken:
      command: /nonexistent/server
`)
	out := ok(t, dir, "mcp", "list", "-c", "c.yaml")
	for _, want := range []string{"local   ", "stdio", "remote  ", "http", "ready", "local__environ", "remote__environ",
		"broken", "restarting: ", "/nonexistent/server"} {
		if !strings.Contains(out, want) {
			t.Errorf("mcp list lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hdr-value-123") {
		t.Errorf("a header value was printed:\n%s", out)
	}
	if out := ok(t, t.TempDir(), "mcp", "list"); !strings.Contains(out, "No MCP servers configured") {
		t.Errorf("without servers: %q", out)
	}
}

// The values of mcp.servers.*.env and headers are secrets: scrubbed from
// pibot's own environment like provider keys.
func TestSecretVarsMCP(t *testing.T) {
	var cfg config.Config
	cfg.MCP.Servers = map[string]config.MCPServer{
		"gh":   {Command: "x", Env: map[string]string{"GITHUB_TOKEN": "ghp-value-123456"}},
		"docs": {URL: "https://h", Headers: map[string]string{"Authorization": "Bearer docs-token-987"}},
	}
	env := []string{"GH=ghp-value-123456", "DOCS=docs-token-987", "HOME=/root"}
	if got := secretVars(cfg, env); !slices.Equal(got, []string{"GH", "DOCS"}) {
		t.Errorf("secretVars = %v, want [GH DOCS]", got)
	}
}

// slowNPX writes an "npx" that never answers the MCP handshake, as npx
// does while it downloads a package.
func slowNPX(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "npx")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 60\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return bin
}

// A server that has not answered yet is "starting, no tools yet", with
// the hint that npx fetches its package, not "starting 0".
func TestMCPListStarting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "data_dir: ./data\nmcp:\n  servers:\n    fetching:\n      command: "+slowNPX(t)+"\n      args: [\"-y\", \"@example/server\"]\n")
	out := ok(t, dir, "mcp", "list", "-c", "c.yaml", "--wait", "500ms")
	for _, want := range []string{"fetching", "stdio", "-", "starting, no tools yet (no answer within 500ms; npx is probably still fetching the package)"} {
		if !strings.Contains(out, want) {
			t.Errorf("mcp list lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "starting  0") || strings.Contains(out, " 0 ") {
		t.Errorf("mcp list counts tools of a server that listed none:\n%s", out)
	}
}

// doctor starts every MCP server as serve would: a working one shows its
// tools, a broken one fails naming its key, one still starting at the
// deadline is a warning that says what it is doing.
func TestDoctorMCP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "c.yaml", fauxConfig+`  workspace: ./ws
  sandbox: off
adapters: {web: {enabled: false}}
mcp:
  servers:
    local:
      command: `+os.Args[0]+`
      args: ["-test.run=^$"]
      env: {`+mcpServerEnv+`: "1"}
    broken:
      command: /nonexistent/server
    fetching:
      command: `+slowNPX(t)+`
`)
	r := pibot(t, dir, "", nil, "doctor", "-c", "c.yaml", "--timeout", "3s")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	for _, want := range []string{"ok    mcp local", "1 tools (stdio)", "FAIL  mcp broken", "/nonexistent/server", "fix mcp.servers.broken",
		"WARN  mcp fetching", "starting, no tools yet", "npx is probably still fetching the package", "pibot mcp list --wait",
		"1 problem(s), 1 warning(s)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor lacks %q:\n%s", want, r.stdout)
		}
	}
}
