// Package tools implements pi's built-in coding tools for pibot: read,
// write, edit, bash, grep, find and ls, with pi's parameter schemas, output
// limits (2,000 lines / 50 KB), truncation notices and error texts, plus
// attach, which sends a workspace file to the chat.
//
// Every path is resolved against the session's workspace (see
// Workspace and access): pibot's own files, /proc, /sys, /dev and the
// host's credentials are refused in every mode; a confined call
// (Options.WorkspaceOnly, or NonOwnersWorkspaceOnly for calls that do not
// serve an owner, see Set.Bind) resolves every path beneath the workspace
// through an os.Root; an unconfined call sees what bash sees (the
// sandbox's layout when it is active). Options.Quota bounds what write,
// edit and bash may write. bash runs in its own process group with an
// explicit environment and, when configured, inside bubblewrap (see
// package sandbox).
//
// Construct a Set with New and hand Set.All (or Set.Select) to the agent.
// Each tool has Spec and Execute methods; a returned error is pi's error
// text for an isError tool result.
package tools
