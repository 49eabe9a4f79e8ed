package tools

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/tools/jail"
	"github.com/pibot/pibot/tools/sandbox"
)

//go:embed specs/*.json
var specFiles embed.FS

// Tool is one tool as the agent sees it.
type Tool interface {
	Spec() llm.ToolSpec
	Execute(ctx context.Context, callID string, args json.RawMessage, update func(llm.ToolOutput)) (llm.ToolOutput, error)
}

// Attacher sends a file to the chat of one conversation. The gateway
// implements it.
type Attacher interface {
	Attach(ctx context.Context, name, mimeType string, r io.Reader, size int64) error
}

// Options configures a Set.
type Options struct {
	// Workspace is the session's working directory (required).
	Workspace string
	// Home is what "~" expands to; empty means Workspace.
	Home string
	// WorkspaceOnly confines every file tool call to the workspace.
	WorkspaceOnly bool
	// NonOwnersWorkspaceOnly confines the calls that do not serve an
	// owner (see Set.Bind; an unbound set serves no owner).
	NonOwnersWorkspaceOnly bool
	// Quota bounds what write, edit and bash may write.
	Quota Quota
	// Sandbox selects how bash is isolated: auto, bwrap or off (default).
	Sandbox sandbox.Mode
	// SandboxCache, if not "", is the file that remembers a successful
	// probe of bwrap (sandbox.ProbeCache), so a process that starts often
	// does not probe again.
	SandboxCache string
	// AllowNetwork keeps the network inside the bash sandbox.
	AllowNetwork bool
	// Env is bash's complete environment. Nil means a minimal safe one:
	// PATH, HOME (the workspace), LANG and TERM=dumb. pibot's own
	// environment (tokens, keys) is never passed on.
	Env []string
	// Shell is the shell to run commands with; empty means /bin/bash,
	// then bash on PATH, then sh.
	Shell string
	// DefaultTimeout applies to bash calls without a timeout; 0 means none.
	DefaultTimeout time.Duration
	// Jail starts every bash call with its own limits and kills all its
	// processes when the call ends. Nil runs bash directly in its own
	// process group, without limits: the binary must call jail.Main
	// first thing for a jail to work.
	Jail *jail.Jail
	// TempDir is where the private directory (OutputDir) for the full
	// output of truncated bash calls is created; empty means
	// os.TempDir().
	TempDir string
	// MaxOutputFile caps the size of one full-output file in bytes;
	// 0 means no cap.
	MaxOutputFile int64
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Attacher enables the attach tool when set.
	Attacher Attacher
	// DenyPaths are files and directories no tool may reach: pibot's data
	// directory, configuration file and secret files. The file tools
	// refuse them (symlinks followed) in every mode; the bash sandbox
	// hides them wherever a mounted directory contains them.
	DenyPaths []string
}

// Set is the tools of one session.
type Set struct {
	ws    *Workspace
	sb    *sandbox.Sandbox
	jail  *jail.Jail
	bash  *Bash
	tools []Tool
	// defaultEnv: bash has DefaultEnv of the workspace (Options.Env nil).
	defaultEnv bool
}

// New builds the tools for one session. It probes the sandbox once (mode
// auto in the background: the first bash call waits for the probe); with
// Sandbox "bwrap" an unusable bubblewrap is an error.
func New(ctx context.Context, opts Options) (*Set, error) {
	if opts.Workspace == "" {
		return nil, fmt.Errorf("tools: workspace is required")
	}
	ws, err := NewWorkspace(opts.Workspace, opts.Home, opts.WorkspaceOnly, opts.DenyPaths...)
	if err != nil {
		return nil, err
	}
	ws.others = opts.NonOwnersWorkspaceOnly
	ws.allowNet = opts.AllowNetwork
	ws.quota.lim = opts.Quota
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Mode auto probes bubblewrap in the background: the first bash call
	// waits for it, a server does not.
	sb, err := sandbox.StartCached(ctx, opts.Sandbox, opts.DenyPaths, "bwrap", sandbox.ProbeCache{File: opts.SandboxCache}, func(sb *sandbox.Sandbox) {
		if sb.Mode() == sandbox.ModeAuto && !sb.Active() {
			log.Warn("bash sandbox unavailable, commands run unsandboxed", "status", sb.Status())
		}
		log.Info("bash isolation", "sandbox", isolation(sb, opts.Jail))
	})
	if err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	ws.sb = sb
	tmp := opts.TempDir
	if tmp == "" {
		tmp = os.TempDir()
	}
	env := opts.Env
	if env == nil {
		env = DefaultEnv(ws.Root())
	}
	s := &Set{ws: ws, sb: sb, jail: opts.Jail, defaultEnv: opts.Env == nil,
		bash: &Bash{ws: ws, sb: sb, jail: opts.Jail, allowNet: opts.AllowNetwork, env: env, shell: opts.Shell,
			defTimeout: opts.DefaultTimeout, outDir: &outputDir{parent: tmp}, maxOutput: opts.MaxOutputFile, log: log}}
	s.build(opts.Attacher)
	return s, nil
}

// build makes the tools of s on s.ws.
func (s *Set) build(to Attacher) {
	ws := s.ws
	s.tools = []Tool{NewRead(ws), s.bash, NewEdit(ws), NewWrite(ws), NewGrep(ws), NewFind(ws), NewLs(ws)}
	if to != nil {
		s.tools = append(s.tools, NewAttach(ws, to))
	}
}

// Bind returns the tools of s for calls that serve whom owner says, at
// the time of each call: an owner (true) or someone else (false). With
// Options.NonOwnersWorkspaceOnly, the file tools confine the calls that
// do not serve an owner; an unbound Set serves no owner. to, if not nil,
// adds attach for that conversation. Bind is cheap: the sandbox, jail,
// locks and quota are shared.
func (s *Set) Bind(owner func() bool, to Attacher) *Set {
	b := &Set{ws: s.ws.Bind(owner), sb: s.sb, jail: s.jail, bash: s.bash, defaultEnv: s.defaultEnv}
	b.build(to)
	return b
}

// Workspace returns the session's workspace.
func (s *Set) Workspace() *Workspace { return s.ws }

// SandboxStatus says how bash commands are isolated, in words: the
// sandbox, then the limits when a jail is in use.
func (s *Set) SandboxStatus() string { return isolation(s.sb, s.jail) }

// All returns every tool of the set.
func (s *Set) All() []Tool { return append([]Tool(nil), s.tools...) }

// Select returns the named tools in the given order. An unknown name is
// an error.
func (s *Set) Select(names []string) ([]Tool, error) {
	out := make([]Tool, 0, len(names))
	for _, n := range names {
		t := s.Get(n)
		if t == nil {
			return nil, fmt.Errorf("tools: unknown tool %q", n)
		}
		out = append(out, t)
	}
	return out, nil
}

// Get returns the named tool or nil.
func (s *Set) Get(name string) Tool {
	for _, t := range s.tools {
		if t.Spec().Name == name {
			return t
		}
	}
	return nil
}

// loadSpec reads an embedded tool spec. The files are part of the binary,
// so a broken one is a programming error.
func loadSpec(name string) llm.ToolSpec {
	b, err := specFiles.ReadFile("specs/" + name + ".json")
	if err != nil {
		panic(fmt.Sprintf("tools: missing spec %s: %v", name, err))
	}
	var raw struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		panic(fmt.Sprintf("tools: bad spec %s: %v", name, err))
	}
	var compact json.RawMessage
	if c, err := compactJSON(raw.Parameters); err == nil {
		compact = c
	}
	return llm.ToolSpec{Name: raw.Name, Description: raw.Description, Parameters: compact}
}

func compactJSON(b []byte) (json.RawMessage, error) {
	var v json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeArgs unmarshals tool arguments into dst.
func decodeArgs(tool string, args json.RawMessage, dst any) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if err := json.Unmarshal(args, dst); err != nil {
		return &Error{Text: fmt.Sprintf("Invalid arguments for tool %q: %v", tool, err), Err: err}
	}
	return nil
}

// textOutput is a tool output with one text block.
func textOutput(text string, details any) llm.ToolOutput {
	return llm.ToolOutput{Content: []llm.Content{llm.TextBlock(text)}, Details: details}
}
