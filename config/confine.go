package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// WorkspaceOnly says whose file tool calls stay inside the workspace
// (agent.workspace_only).
type WorkspaceOnly string

// The values of agent.workspace_only.
const (
	// WorkspaceOnlyAll confines every call (true).
	WorkspaceOnlyAll WorkspaceOnly = "true"
	// WorkspaceOnlyNone confines no call (false): the file tools of
	// every user see what bash sees.
	WorkspaceOnlyNone WorkspaceOnly = "false"
	// WorkspaceOnlyNonOwners confines the calls of requests from users
	// who are not owners (the default).
	WorkspaceOnlyNonOwners WorkspaceOnly = "non_owners"
)

// Everyone reports whether every call is confined.
func (w WorkspaceOnly) Everyone() bool { return w == WorkspaceOnlyAll }

// NonOwners reports whether the calls of non-owners' requests are
// confined.
func (w WorkspaceOnly) NonOwners() bool { return w != WorkspaceOnlyNone }

// UnmarshalYAML reads true, false or non_owners.
func (w *WorkspaceOnly) UnmarshalYAML(n *yaml.Node) error {
	var v string
	if err := n.Decode(&v); err != nil {
		return err
	}
	switch WorkspaceOnly(v) {
	case WorkspaceOnlyAll, WorkspaceOnlyNone, WorkspaceOnlyNonOwners:
		*w = WorkspaceOnly(v)
		return nil
	}
	return fmt.Errorf("line %d: %q is not true, false or non_owners", n.Line, v)
}
