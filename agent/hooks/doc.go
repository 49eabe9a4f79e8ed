// Package hooks runs operator-configured hook programs at points of the
// agent loop, a small and stable subset of pi's extension events carried
// over a process boundary.
//
// For each event a hook subscribed to, the hook's executable is started,
// gets one JSON line on stdin (the event) and answers with at most one
// JSON line on stdout (what to do). The events are input (continue,
// transform the text, or handle it with a reply), tool_call (allow, block
// with a reason, or modify the arguments), tool_result (modify the
// result), before_agent_start (add context to the system prompt) and
// agent_end (observe). docs/hooks.md describes the protocol.
//
// A hook that fails (exits non-zero, answers garbage, or exceeds its
// timeout) is logged and skipped when it fails open (the default); when it
// fails closed the event's action is refused (a tool call is blocked, a
// message is not processed). Hooks are trusted configuration, not model
// input: they run as pibot's user with pibot's environment, from which the
// secrets have been scrubbed at start.
package hooks
