package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/tools/mcp"
)

// stdioServer configures the test binary as a stdio server.
func stdioServer(name string) mcp.Server {
	return mcp.Server{Name: name, Command: os.Args[0], Args: []string{"-test.run=^$"},
		Env: map[string]secret.Secret{serverEnv: secret.New("1"), "MCP_TOKEN": secret.New("s3cret-token")}}
}

func newManager(t *testing.T, servers ...mcp.Server) *mcp.Manager {
	t.Helper()
	m, err := mcp.New(mcp.Options{Servers: servers, Environ: []string{"PATH=" + os.Getenv("PATH"), "BASE_VAR=base"},
		MinBackoff: 300 * time.Millisecond, MaxBackoff: time.Second, StopTimeout: 500 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func find(tools []*mcp.Tool, name string) *mcp.Tool {
	for _, t := range tools {
		if t.Name() == name {
			return t
		}
	}
	return nil
}

func names(tools []*mcp.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name())
	}
	slices.Sort(out)
	return out
}

func call(t *testing.T, tool *mcp.Tool, args string) (string, error) {
	t.Helper()
	out, err := tool.Execute(context.Background(), "call1", json.RawMessage(args), nil)
	return llm.JoinText(out.Content, "\n"), err
}

// eventually polls cond until it holds or 10s passed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestStdioListAndCall(t *testing.T) {
	m := newManager(t, stdioServer("fs"))
	if st := m.Status()[0]; st.State != mcp.StateIdle {
		t.Fatalf("state before first use = %s, want idle (servers start lazily)", st.State)
	}
	tools := m.Tools(context.Background())
	want := []string{"fs__crash", "fs__echo", "fs__fail", "fs__grow", "fs__spawn"}
	if got := names(tools); !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	echo := find(tools, "fs__echo")
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(echo.Spec().Parameters, &schema); err != nil || schema.Type != "object" || schema.Properties["text"] == nil {
		t.Fatalf("echo schema = %s (%v), want the server's object schema with text", echo.Spec().Parameters, err)
	}
	if echo.Spec().Description != "Echoes text." {
		t.Errorf("description = %q", echo.Spec().Description)
	}
	got, err := call(t, echo, `{"text":"hi","env":"MCP_TOKEN"}`)
	if err != nil || got != `echo: hi MCP_TOKEN="s3cret-token"(true)` {
		t.Fatalf("echo = %q, %v; want its own env passed", got, err)
	}
	got, _ = call(t, echo, `{"text":"x","env":"BASE_VAR"}`)
	if !strings.Contains(got, `BASE_VAR="base"(true)`) {
		t.Errorf("base environment not passed: %q", got)
	}
	os.Setenv("PIBOT_NOT_PASSED", "leak") //nolint:errcheck // read by nobody else
	defer os.Unsetenv("PIBOT_NOT_PASSED")
	got, _ = call(t, echo, `{"text":"x","env":"HOME"}`)
	if !strings.Contains(got, `HOME=""(false)`) {
		t.Errorf("a variable outside the base environment reached the server: %q", got)
	}
	if _, err := call(t, find(tools, "fs__fail"), `{}`); err == nil || !strings.Contains(err.Error(), "the disk is on fire") {
		t.Errorf("error result = %v, want the server's message as an error", err)
	}
	if st := m.Status()[0]; st.State != mcp.StateReady || st.Transport != "stdio" || len(st.Tools) != 5 {
		t.Errorf("status = %+v", st)
	}
}

func TestStdioCrashRestart(t *testing.T) {
	m := newManager(t, stdioServer("fs"))
	tools := m.Tools(context.Background())
	if _, err := call(t, find(tools, "fs__crash"), `{}`); err == nil {
		t.Fatal("a call whose server died succeeded")
	}
	eventually(t, "restarting", func() bool { return m.Status()[0].State == mcp.StateRestarting })
	// Meanwhile its tools stay listed and say why they fail.
	tools = m.Tools(context.Background())
	echo := find(tools, "fs__echo")
	if echo == nil {
		t.Fatalf("tools of a crashed server vanished: %v", names(tools))
	}
	if _, err := call(t, echo, `{"text":"hi"}`); err == nil || !strings.Contains(err.Error(), "being restarted") {
		t.Fatalf("call during restart = %v, want a clear restarting error", err)
	}
	eventually(t, "ready again", func() bool { return m.Status()[0].State == mcp.StateReady })
	if got, err := call(t, echo, `{"text":"back"}`); err != nil || got != "echo: back" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
	if st := m.Status()[0]; st.Restarts != 1 || st.Err != "" {
		t.Errorf("status = %+v, want one restart and no error", st)
	}
}

func TestStdioListChanged(t *testing.T) {
	m := newManager(t, stdioServer("fs"))
	tools := m.Tools(context.Background())
	if find(tools, "fs__extra") != nil {
		t.Fatal("extra listed before it exists")
	}
	if _, err := call(t, find(tools, "fs__grow"), `{}`); err != nil {
		t.Fatal(err)
	}
	var extra *mcp.Tool
	eventually(t, "fs__extra listed", func() bool {
		extra = find(m.Tools(context.Background()), "fs__extra")
		return extra != nil
	})
	if got, err := call(t, extra, `{}`); err != nil || got != "extra works" {
		t.Fatalf("extra = %q, %v", got, err)
	}
}

func TestStdioNoOrphans(t *testing.T) {
	m := newManager(t, stdioServer("fs"))
	pidText, err := call(t, find(m.Tools(context.Background()), "fs__spawn"), `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(pidText, &pid); err != nil || !alive(pid) {
		t.Fatalf("child %q not running: %v", pidText, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the server's child to die with it", func() bool { return !alive(pid) })
	if st := m.Status()[0]; st.State != mcp.StateStopped {
		t.Errorf("state after Close = %s", st.State)
	}
	if _, err := call(t, find(m.Tools(context.Background()), "fs__echo"), `{"text":"x"}`); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("call after Close = %v, want stopped", err)
	}
}

func TestStdioServerMissing(t *testing.T) {
	m := newManager(t, mcp.Server{Name: "gone", Command: "/nonexistent/mcp-server"})
	if tools := m.Tools(context.Background()); len(tools) != 0 {
		t.Fatalf("tools of a server that never started: %v", names(tools))
	}
	st := m.Status()[0]
	if st.State != mcp.StateRestarting || !strings.Contains(st.Err, "/nonexistent/mcp-server") {
		t.Fatalf("status = %+v, want restarting with the error", st)
	}
}

func TestHTTPServer(t *testing.T) {
	srv := testServer(func() {})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(requireHeader(h, "Authorization", "Bearer tok-123"))
	t.Cleanup(ts.Close) // after the manager's Close: its event stream holds a connection

	m := newManager(t, mcp.Server{Name: "web", URL: ts.URL, Headers: map[string]secret.Secret{"Authorization": secret.New("Bearer tok-123")}})
	tools := m.Tools(context.Background())
	if got := names(tools); !slices.Contains(got, "web__echo") || !slices.Contains(got, "web__grow") {
		t.Fatalf("tools = %v", got)
	}
	if got, err := call(t, find(tools, "web__echo"), `{"text":"over http"}`); err != nil || got != "echo: over http" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	if _, err := call(t, find(tools, "web__grow"), `{}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web__extra listed", func() bool { return find(m.Tools(context.Background()), "web__extra") != nil })
	if st := m.Status()[0]; st.Transport != "http" || st.State != mcp.StateReady {
		t.Errorf("status = %+v", st)
	}
}

func TestHTTPServerRefusesWithoutHeaders(t *testing.T) {
	srv := testServer(func() {})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(requireHeader(h, "Authorization", "Bearer tok-123"))
	t.Cleanup(ts.Close) // after the manager's Close: its event stream holds a connection
	m := newManager(t, mcp.Server{Name: "web", URL: ts.URL})
	if tools := m.Tools(context.Background()); len(tools) != 0 {
		t.Fatalf("tools without credentials: %v", names(tools))
	}
	if st := m.Status()[0]; st.State != mcp.StateRestarting || st.Err == "" {
		t.Fatalf("status = %+v", st)
	}
}

func TestSecretsRedacted(t *testing.T) {
	s := mcp.Server{Name: "x", URL: "http://h", Headers: map[string]secret.Secret{"Authorization": secret.New("Bearer tok-123")},
		Env: map[string]secret.Secret{"K": secret.New("s3cret-value")}}
	for _, out := range []string{fmt.Sprintf("%v", s), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", s)} {
		if strings.Contains(out, "tok-123") || strings.Contains(out, "s3cret-value") {
			t.Errorf("secret printed: %s", out)
		}
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		srv  mcp.Server
		want string
	}{
		{"bad name", mcp.Server{Name: "a b", Command: "x"}, "letters"},
		{"separator", mcp.Server{Name: "a__b", Command: "x"}, `"__"`},
		{"neither", mcp.Server{Name: "a"}, "either command"},
		{"both", mcp.Server{Name: "a", Command: "x", URL: "http://h"}, "either command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := mcp.New(mcp.Options{Servers: []mcp.Server{tc.srv}}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := mcp.New(mcp.Options{Servers: []mcp.Server{{Name: "a", Command: "x"}, {Name: "a", URL: "http://h"}}}); err == nil {
		t.Error("a name configured twice was accepted")
	}
}

func TestToolName(t *testing.T) {
	for _, tc := range []struct{ server, tool, want string }{
		{"gh", "create_issue", "gh__create_issue"},
		{"gh", "files.read", "gh__files_read"},
		{"gh", strings.Repeat("x", 80), "gh__" + strings.Repeat("x", 60)},
	} {
		if got := mcp.ToolName(tc.server, tc.tool); got != tc.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", tc.server, tc.tool, got, tc.want)
		}
	}
}

// An HTTP server that drops its connections (a restart of the service)
// is reconnected, and its tools work again.
func TestHTTPServerReconnects(t *testing.T) {
	srv := testServer(func() {})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	m := newManager(t, mcp.Server{Name: "web", URL: ts.URL})
	echo := find(m.Tools(context.Background()), "web__echo")
	if echo == nil {
		t.Fatal("no web__echo")
	}
	ts.CloseClientConnections()
	eventually(t, "a reconnect", func() bool { st := m.Status()[0]; return st.Restarts >= 1 && st.State == mcp.StateReady })
	if got, err := call(t, echo, `{"text":"again"}`); err != nil || got != "echo: again" {
		t.Fatalf("after reconnect: %q, %v", got, err)
	}
}
