// Package gateway is the heart of pibot: it takes normalised events from
// chat adapters, decides who may talk (package access), drops duplicates,
// makes every accepted message durable (the inbox) before the platform is
// acknowledged, maps each chat location to a session file and a head
// (threads and replies are branches of one session tree), and runs the
// agent for that location through the one owner of the session file.
//
// A message sent while the agent works is steered into the run, queued as a
// follow-up, collected, or interrupts the run, per location. Replies stream
// through a stream controller (package gateway/stream) that edits a live
// chat message at the platform's cadence. Commands (/help, /new, /stop,
// /tree, /fork, …) and tool approvals with buttons work the same on every
// adapter.
//
// The gateway never names a platform SDK, a provider or a tool package: it
// sees chat.Adapter, llm.Model through Models, and agent.Tool values built
// by the caller.
package gateway
