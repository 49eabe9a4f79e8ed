// Package tools implements pi's built-in coding tools for pibot: read,
// write, edit, bash, grep, find and ls, with pi's parameter schemas, output
// limits (2,000 lines / 50 KB), truncation notices and error texts, plus
// attach, which sends a workspace file to the chat.
//
// Every path is resolved against the session's workspace; with
// Options.WorkspaceOnly, paths that leave it (symlinks included) are
// refused. bash runs in its own process group with an explicit environment
// and, when configured, inside bubblewrap (see package sandbox).
//
// Construct a Set with New and hand Set.All (or Set.Select) to the agent.
// Each tool has Spec and Execute methods; a returned error is pi's error
// text for an isError tool result.
package tools
