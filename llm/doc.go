// Package llm is pibot's vocabulary for talking to language models: the
// message shapes of the pi coding agent (user, assistant, toolResult and the
// coding-agent roles bashExecution, custom, branchSummary and
// compactionSummary), content blocks, usage and cost, model descriptions,
// the streaming event contract every provider implements, and the errors
// providers report.
//
// Messages marshal to exactly the JSON pi writes (same key names, types and
// optional-field rules) and keep fields they do not know, so a session file
// written by a newer pi loses nothing when pibot rewrites or forks it.
//
// The package depends on the standard library only: no HTTP, no vendor SDK,
// no platform names, no logging.
package llm
