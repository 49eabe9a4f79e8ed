package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/tools/mcp"
)

// mcpStartTimeout bounds a server's first connection when a run asks for
// tools (and what `pibot mcp list` waits).
const mcpStartTimeout = 20 * time.Second

// newMCP builds the manager of mcp.servers. Stdio servers get pibot's
// environment as it is now (scrubbed of pibot's secrets once the
// configuration was loaded) plus their own env.
func newMCP(cfg config.Config, log *slog.Logger) (*mcp.Manager, error) {
	names := make([]string, 0, len(cfg.MCP.Servers))
	for name := range cfg.MCP.Servers {
		names = append(names, name)
	}
	sort.Strings(names)
	var servers []mcp.Server
	for _, name := range names {
		s := cfg.MCP.Servers[name]
		servers = append(servers, mcp.Server{Name: name, Command: s.Command, Args: s.Args, Env: secrets(s.Env), Dir: s.Cwd,
			URL: s.URL, Headers: secrets(s.Headers)})
	}
	m, err := mcp.New(mcp.Options{Servers: servers, Environ: os.Environ(), StartTimeout: mcpStartTimeout,
		CallTimeout: cfg.Agent.ToolTimeout.D(), Logger: log})
	if err != nil {
		return nil, &config.Error{Key: "mcp.servers", Msg: err.Error()}
	}
	return m, nil
}

// secrets wraps the values of m.
func secrets(m map[string]string) map[string]secret.Secret {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]secret.Secret, len(m))
	for k, v := range m {
		out[k] = secret.New(v)
	}
	return out
}

// runMCP runs `pibot mcp list`: it starts every configured server, waits for
// its first connection and prints its state and tools.
func runMCP(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 || args[0] != "list" {
		return usageErr("usage: pibot mcp list [-c FILE]")
	}
	fs := c.newFlags("mcp list")
	file := configFlag(fs)
	wait := fs.Duration("wait", mcpStartTimeout, "how long to wait for the servers' first connection")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if err := wantArgs("mcp list", pos, 0, "no arguments"); err != nil {
		return err
	}
	cfg, _, err := c.loadConfig(*file)
	if err != nil {
		return err
	}
	if len(cfg.MCP.Servers) == 0 {
		fmt.Fprintln(c.stdout, "No MCP servers configured (mcp.servers; `pibot config example` shows the keys).")
		return nil
	}
	m, err := newMCP(cfg, newLogger(c.stderr, config.Log{Level: "warn"}))
	if err != nil {
		return err
	}
	defer m.Close() //nolint:errcheck // Close reports nothing
	sctx, cancel := context.WithTimeout(ctx, *wait)
	m.Start(sctx)
	cancel()
	writeMCPStatus(c.stdout, m.Status(), cfg.MCP.Servers, *wait)
	return nil
}

// packageRunners fetch the package they run on first use, which can take
// a minute before the server answers.
var packageRunners = []string{"npx", "uvx", "bunx", "pnpx", "pipx"}

// mcpState says in words what a server is doing after waited: a server
// still starting has no tools yet, and one run by a package runner (npx)
// is most likely fetching its package.
func mcpState(s mcp.Status, srv config.MCPServer, waited time.Duration) string {
	switch s.State {
	case mcp.StateStarting, mcp.StateIdle:
		msg := fmt.Sprintf("starting, no tools yet (no answer within %s", waited)
		if runner := filepath.Base(srv.Command); slices.Contains(packageRunners, runner) {
			msg += "; " + runner + " is probably still fetching the package"
		}
		return msg + ")"
	case mcp.StateReady:
		return string(s.State)
	}
	if s.Err != "" {
		return string(s.State) + ": " + s.Err
	}
	return string(s.State)
}

// writeMCPStatus prints one block per server: name, transport, state
// (with the error when not ready) and its tools.
func writeMCPStatus(w interface{ Write([]byte) (int, error) }, list []mcp.Status, servers map[string]config.MCPServer, waited time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTRANSPORT\tTOOLS\tSTATE")
	for _, s := range list {
		tools := "-" // not listed yet
		if s.State == mcp.StateReady || len(s.Tools) > 0 {
			tools = strconv.Itoa(len(s.Tools))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, s.Transport, tools, mcpState(s, servers[s.Name], waited))
	}
	tw.Flush() //nolint:errcheck // stdout
	for _, s := range list {
		if len(s.Tools) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", s.Name)
		for _, t := range s.Tools {
			desc, _, _ := strings.Cut(t.Description, "\n")
			fmt.Fprintf(w, "  %s  %s\n", t.Name, desc)
		}
	}
}
