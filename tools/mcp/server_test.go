package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as a stdio MCP server: TestMain runs it when
// this variable is set (the manager starts os.Args[0] with it).
const serverEnv = "PIBOT_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		srv := testServer(func() { os.Exit(3) })
		if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
	Env  string `json:"env,omitempty" jsonschema:"an environment variable to append"`
}

type empty struct{}

// testServer is the MCP server of the tests (the SDK's server side):
// echo, fail (an error result), crash (calls crash), grow (adds a tool,
// which sends tools/list_changed) and spawn (starts a child process and
// returns its pid).
func testServer(crash func()) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "pibot-test", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			text := "echo: " + in.Text
			if in.Env != "" {
				v, ok := os.LookupEnv(in.Env)
				text += fmt.Sprintf(" %s=%q(%v)", in.Env, v, ok)
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("the disk is on fire")
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "crash", Description: "Crashes the server."},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			crash()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "crashed"}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "grow", Description: "Adds the tool extra."},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			sdk.AddTool(srv, &sdk.Tool{Name: "extra", Description: "Added later."},
				func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
					return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "extra works"}}}, nil, nil
				})
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "grown"}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "spawn", Description: "Starts a long-lived child."},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			cmd := exec.Command("sleep", "300")
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			go cmd.Wait() //nolint:errcheck // reaped when it ends
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strconv.Itoa(cmd.Process.Pid)}}}, nil, nil
		})
	return srv
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] != 'Z'
		}
	}
	return true
}

// requireHeader wraps h so that requests without the header are refused.
func requireHeader(h http.Handler, key, value string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(key) != value {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
