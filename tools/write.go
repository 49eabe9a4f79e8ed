package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/pibot/pibot/llm"
)

// Write is pi's write tool: create or overwrite a file, making parent
// directories.
type Write struct {
	ws   *Workspace
	spec llm.ToolSpec
}

// NewWrite returns the write tool for ws.
func NewWrite(ws *Workspace) *Write { return &Write{ws: ws, spec: loadSpec("write")} }

// Spec describes the tool.
func (t *Write) Spec() llm.ToolSpec { return t.spec }

type writeArgs struct {
	Path    *string `json:"path"`
	Content *string `json:"content"`
}

// Execute writes the file. The reported size is the content's length as a
// JavaScript string (UTF-16 units), as pi reports it.
func (t *Write) Execute(ctx context.Context, _ string, raw json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
	var a writeArgs
	if err := decodeArgs("write", raw, &a); err != nil {
		return llm.ToolOutput{}, err
	}
	if a.Path == nil {
		return llm.ToolOutput{}, missing("write", "path")
	}
	if a.Content == nil {
		return llm.ToolOutput{}, missing("write", "content")
	}
	abs, err := t.ws.Resolve(*a.Path)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	unlock, err := t.ws.lock(ctx, abs)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	defer unlock()
	if ctx.Err() != nil {
		return llm.ToolOutput{}, errAborted
	}
	dir := filepath.Dir(abs)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return llm.ToolOutput{}, nodeError(err, "mkdir", dir)
	}
	if err := t.ws.writeFile(abs, *a.Path, []byte(*a.Content), 0o644); err != nil {
		return llm.ToolOutput{}, err
	}
	return textOutput("Successfully wrote "+itoa(utf16Len(*a.Content))+" bytes to "+*a.Path, nil), nil
}
