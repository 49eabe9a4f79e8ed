// Package mcp connects pibot to Model Context Protocol servers and exposes
// their tools to the agent as "SERVER__tool".
//
// A Manager owns one supervisor per configured server. Servers start
// lazily, the first time a run asks for tools; a stdio server runs in its
// own process group with pibot's (already scrubbed) environment plus its
// own env, and the whole group is killed when the server stops, so a
// server never leaves orphans. A server whose connection ends is restarted
// with exponential back-off; meanwhile its tools stay listed and each call
// returns an error saying the server is restarting. A server's
// notifications/tools/list_changed makes the manager list its tools again.
//
// The package uses the official Go SDK (github.com/modelcontextprotocol/go-sdk)
// and implements the agent's tool interface structurally, like package
// tools.
package mcp
