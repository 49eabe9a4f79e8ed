package main

import (
	"context"
	"io"
	"slices"
	"testing"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/tools"
	"github.com/pibot/pibot/tools/sandbox"
)

type nopAttacher struct{}

func (nopAttacher) Attach(context.Context, string, string, io.Reader, int64) error { return nil }

// TestConfigToolNamesMatchTools keeps config's list of tool names (what
// agent.tools and agent.approvals accept) equal to the real tool set.
func TestConfigToolNamesMatchTools(t *testing.T) {
	set, err := tools.New(t.Context(), tools.Options{Workspace: t.TempDir(), Sandbox: sandbox.ModeOff, Attacher: nopAttacher{}})
	if err != nil {
		t.Fatal(err)
	}
	var real []string
	for _, tool := range set.All() {
		real = append(real, tool.Spec().Name)
	}
	want := config.ToolNames()
	slices.Sort(real)
	slices.Sort(want)
	if !slices.Equal(real, want) {
		t.Fatalf("config.ToolNames() = %v, the tools package has %v: update config.ToolNames", want, real)
	}
}
