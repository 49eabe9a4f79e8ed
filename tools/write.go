package tools

import (
	"context"
	"encoding/json"
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
	acc := t.ws.call()
	abs, err := acc.resolve(*a.Path, true)
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
	var old int64
	if st, err := acc.stat(abs, *a.Path); err == nil && st.Mode().IsRegular() {
		old = st.Size()
	}
	undo, err := t.ws.quota.grow(old, int64(len(*a.Content)))
	if err != nil {
		return llm.ToolOutput{}, err
	}
	dir := filepath.Dir(abs)
	if err := acc.mkdirAll(dir, *a.Path); err != nil {
		undo()
		return llm.ToolOutput{}, ioError(err, "mkdir", dir)
	}
	if err := acc.writeFile(abs, *a.Path, []byte(*a.Content), 0o644); err != nil {
		undo()
		return llm.ToolOutput{}, err
	}
	return textOutput("Successfully wrote "+itoa(utf16Len(*a.Content))+" bytes to "+*a.Path, nil), nil
}
