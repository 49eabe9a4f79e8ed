package mcp

import (
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/pibot/pibot/internal/secret"
)

// Server describes one MCP server: either a stdio command or a streamable
// HTTP endpoint.
type Server struct {
	// Name prefixes its tools ("NAME__tool"): letters, digits, - and _,
	// without "__".
	Name string
	// Command, Args, Env and Dir start a stdio server. Env is added to
	// the base environment of Options.
	Command string
	Args    []string
	Env     map[string]secret.Secret
	Dir     string
	// URL and Headers reach a streamable HTTP server.
	URL     string
	Headers map[string]secret.Secret
}

// Options configures a Manager.
type Options struct {
	Servers []Server
	// Environ is the base environment of stdio servers (pibot's own,
	// scrubbed of its secrets); nil means none.
	Environ []string
	// StartTimeout bounds connecting and listing tools when a run asks
	// for them; 0 means 20s.
	StartTimeout time.Duration
	// CallTimeout bounds one tool call that has no deadline of its own;
	// 0 means none.
	CallTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delay before a restart; 0
	// means 1s and 1m.
	MinBackoff, MaxBackoff time.Duration
	// StopTimeout is how long a stdio server gets to exit after its stdin
	// closes before its process group is killed; 0 means 2s.
	StopTimeout time.Duration
	// Logger receives state changes; nil discards them.
	Logger *slog.Logger
	// HTTPClient's transport carries requests to HTTP servers; nil means
	// http.DefaultTransport.
	HTTPClient *http.Client
}

// Sep separates a server's name from its tool's name.
const Sep = "__"

var (
	// A sync.OnceValue of an immutable value: built on first use, not at start-up.
	serverName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`) })
	// A sync.OnceValue of an immutable value: built on first use, not at start-up.
	badToolRun = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9_-]+`) })
)

// maxToolName is the longest tool name model APIs accept.
const maxToolName = 64

// ValidName reports why name cannot name a server, or nil.
func ValidName(name string) error {
	switch {
	case !serverName().MatchString(name):
		return fmt.Errorf("%q must be letters, digits, - and _ (starting with a letter or digit)", name)
	case len(name) > 32:
		return fmt.Errorf("%q is longer than 32 characters", name)
	case strings.Contains(name, Sep):
		return fmt.Errorf("%q must not contain %q (it separates the server from the tool)", name, Sep)
	}
	return nil
}

// ToolName is the name the model sees for tool of server: "server__tool",
// with characters model APIs refuse replaced by "_" and cut to 64
// characters.
func ToolName(server, tool string) string {
	n := server + Sep + badToolRun().ReplaceAllString(tool, "_")
	if len(n) > maxToolName {
		n = n[:maxToolName]
	}
	return n
}
