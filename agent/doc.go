// Package agent is pibot's agent loop, modelled on pi's Agent and
// AgentSession: it streams assistant messages from an [llm.Model], runs the
// tool calls they contain (validated against each tool's JSON schema, in
// parallel unless configured or demanded otherwise, with before/after
// hooks), injects steering and follow-up messages at pi's boundaries,
// retries retryable provider errors, and emits pi's events in pi's order.
//
// # Events
//
// A run emits agent_start, turn_start, the prompt messages
// (message_start/message_end), then per turn the assistant message
// (message_start, message_update..., message_end), the tool executions
// (tool_execution_start/update/end; in parallel mode ends come in
// completion order) and the toolResult messages (in the assistant's
// order), turn_end, and finally agent_end. Session events follow pi's
// AgentSession: queue_update before a queued user message starts,
// auto_retry_start/auto_retry_end around retries, and compaction_start/
// compaction_end from [Maintenance]. [Event.MarshalJSON] writes each event
// exactly as pi prints it in --mode json and RPC mode.
//
// # Concurrency
//
// [Agent.Prompt] and [Agent.Continue] run on the caller's goroutine and call
// emit synchronously from it, one event at a time; a consumer may persist
// on message_end before the loop continues. SteerTagged, FollowUpTagged,
// Abort and the read accessors are safe from any goroutine, including from
// inside emit. Tool goroutines of a batch are owned by the run and always
// awaited.
//
// # Failures
//
// Provider failures are messages with stopReason error/aborted, as in pi.
// A tool error, panic, unknown tool, invalid arguments or a blocking hook
// becomes an error toolResult. If the loop itself fails (a context
// transform fails, no model), a synthetic error assistant message is
// recorded and only agent_end is emitted. Before every model call the
// transcript is repaired so that each tool call has exactly one result
// ([RepairTranscript]).
//
// The package does no I/O except through the Model and Tools it is given;
// compaction lives in the sub-package compaction.
package agent
