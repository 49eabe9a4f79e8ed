package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pibot/pibot/llm"
)

// Tool is one tool of an MCP server as the agent sees it. It implements
// the agent's tool interface (Spec, Execute).
type Tool struct {
	srv     *server
	name    string // SERVER__tool
	remote  string // the server's name for it
	spec    llm.ToolSpec
	timeout time.Duration
}

func newTool(s *server, name string, t *sdk.Tool, timeout time.Duration) *Tool {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil || string(schema) == "null" {
		schema = []byte(`{"type":"object","properties":{}}`)
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	return &Tool{srv: s, name: name, remote: t.Name, timeout: timeout,
		spec: llm.ToolSpec{Name: name, Description: desc, Parameters: schema}}
}

// Name is the name the model sees (SERVER__tool).
func (t *Tool) Name() string { return t.name }

// Server is the name of the tool's server.
func (t *Tool) Server() string { return t.srv.cfg.Name }

// Spec describes the tool with the server's JSON schema.
func (t *Tool) Spec() llm.ToolSpec { return t.spec }

// Execute calls the tool on its server. A server that is down, a failed
// call and a result the server marks as an error are errors.
func (t *Tool) Execute(ctx context.Context, _ string, args json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
	cs, err := t.srv.current()
	if err != nil {
		return llm.ToolOutput{}, err
	}
	if t.timeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, t.timeout)
			defer cancel()
		}
	}
	trimmed := strings.TrimSpace(string(args))
	if trimmed == "" || trimmed == "null" {
		args = json.RawMessage(`{}`)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		if errors.Is(err, sdk.ErrConnectionClosed) {
			return llm.ToolOutput{}, fmt.Errorf("MCP server %q closed the connection during the call (it will be restarted): %w", t.srv.cfg.Name, err)
		}
		return llm.ToolOutput{}, fmt.Errorf("mcp: %s: %w", t.name, err)
	}
	out := convert(res)
	if res.IsError {
		return llm.ToolOutput{}, errors.New(llm.JoinText(out.Content, "\n"))
	}
	return out, nil
}

// convert maps an MCP result to pi's content blocks: text and images as
// they are, other blocks as JSON text.
func convert(res *sdk.CallToolResult) llm.ToolOutput {
	var out llm.ToolOutput
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			out.Content = append(out.Content, llm.TextBlock(c.Text))
		case *sdk.ImageContent:
			out.Content = append(out.Content, llm.ImageBlock(base64.StdEncoding.EncodeToString(c.Data), c.MIMEType))
		case *sdk.ResourceLink:
			out.Content = append(out.Content, llm.TextBlock(fmt.Sprintf("[resource %s](%s)", c.Name, c.URI)))
		default:
			b, err := json.Marshal(c)
			if err != nil {
				b = []byte(fmt.Sprintf("(unsupported %T content)", c))
			}
			out.Content = append(out.Content, llm.TextBlock(string(b)))
		}
	}
	if len(out.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			out.Content = append(out.Content, llm.TextBlock(string(b)))
		}
	}
	if len(out.Content) == 0 {
		out.Content = append(out.Content, llm.TextBlock("(no output)"))
	}
	return out
}
