package tools

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"os"
	"path/filepath"

	"github.com/pibot/pibot/llm"
)

// Attach sends a workspace file to the chat through an Attacher. Files
// outside the workspace are always refused, whatever WorkspaceOnly says.
type Attach struct {
	ws   *Workspace
	to   Attacher
	spec llm.ToolSpec
}

// NewAttach returns the attach tool for ws sending through to.
func NewAttach(ws *Workspace, to Attacher) *Attach {
	return &Attach{ws: ws, to: to, spec: loadSpec("attach")}
}

// Spec describes the tool.
func (t *Attach) Spec() llm.ToolSpec { return t.spec }

type attachArgs struct {
	Path *string `json:"path"`
	Name string  `json:"name"`
}

// Execute uploads the file.
func (t *Attach) Execute(ctx context.Context, _ string, raw json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
	var a attachArgs
	if err := decodeArgs("attach", raw, &a); err != nil {
		return llm.ToolOutput{}, err
	}
	if a.Path == nil {
		return llm.ToolOutput{}, missing("attach", "path")
	}
	if ctx.Err() != nil {
		return llm.ToolOutput{}, errAborted
	}
	acc := t.ws.confinedCall()
	abs, err := acc.resolve(*a.Path, false)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	f, err := acc.open(abs, *a.Path, os.O_RDONLY, 0, false)
	if err != nil {
		return llm.ToolOutput{}, ioError(err, "open", abs)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return llm.ToolOutput{}, nodeError(err, "stat", abs)
	}
	if !st.Mode().IsRegular() {
		return llm.ToolOutput{}, failf("Not a regular file: %s", *a.Path)
	}
	name := a.Name
	if name == "" {
		name = filepath.Base(abs)
	}
	mt := mime.TypeByExtension(filepath.Ext(name))
	if mt == "" {
		head := make([]byte, 512)
		n, _ := f.ReadAt(head, 0)
		mt = http.DetectContentType(head[:n])
	}
	if err := t.to.Attach(ctx, name, mt, f, st.Size()); err != nil {
		if ctx.Err() != nil {
			return llm.ToolOutput{}, errAborted
		}
		return llm.ToolOutput{}, &Error{Text: "Could not attach " + *a.Path + ": " + err.Error(), Err: err}
	}
	return textOutput("Attached "+*a.Path+" ("+formatSize(int(st.Size()))+") to the chat as "+name+".", nil), nil
}
