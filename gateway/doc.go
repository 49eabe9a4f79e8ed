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
//
// # Files
//
// A file's prefix names the layer it belongs to, in the order a message
// passes them:
//
//   - gateway.go: the composition root (New, Run, Deps), gateway_config.go
//     (Config and its defaults), gateway_work.go (workGroup: the goroutines
//     of work shutdown waits for); doc.go,
//     metrics.go, adapters.go (the adapter runner), replier.go (the
//     gateway's own short messages), extend.go (Extensions), agents.go,
//     announce.go, schedules.go, spend.go, worktrees.go (the worktrees
//     seam, the pibot.worktree entry, pruning).
//   - intake*.go: events from the adapters. intake.go (sink: screen,
//     classify, admit; execute), intake_admission.go (the admission seam,
//     local and shared), intake_inbound.go (inbox item kinds, route),
//     intake_threads.go (channel threads), intake_moved.go (a moved
//     conversation).
//   - command_*.go: commands and buttons. command_table.go (the table,
//     dispatch), command_handlers.go, command_tree.go (/tree, /fork),
//     command_limits.go (/limits), command_buttons.go (presses),
//     command_host.go (what commands and approvals get of the gateway),
//     command_worktree.go (/diff, /worktree).
//   - mailbox.go: one ordered queue of work per location.
//   - registry*.go: the loaded owners and how a location finds its session.
//     registry.go (locate), registry_lease.go (session leases),
//     registry_index.go (the location index), registry_history.go (the
//     history adapters show), registry_resume.go (SessionOf).
//   - owner*.go: the session engine's owner of a session file. owner.go,
//     owner_state.go (the methods the rest of the package uses: the engine
//     is sealed, owner_boundary_test.go; locView, what a location's branch
//     says), owner_sessionfile.go (lease, heads, appends; fileAgent, the
//     session's agent), owner_queue.go (queue modes), owner_queuenote.go,
//     owner_start.go (starting runs), owner_durable.go (durableAcks:
//     acks once durable).
//   - run*.go: one agent run. run.go (the run: set up, run, deliver,
//     stop), run_events.go, run_record.go, run_maintain.go (compaction),
//     run_reply.go (runReply: what the chat is shown), run_journal.go
//     (runJournal: what the run writes to the session, its messages and
//     the reply journal's pibot.reply and pibot.delivery entries),
//     run_worktree.go (runWorktree: the branch's git worktree),
//     run_msgs.go (the chat messages a run answers), run_files.go
//     (received files), run_stack.go.
//   - approval*.go: tool approvals: decisions (approval.go,
//     approval_decide.go), the policies per agent (approval_rules.go), MCP
//     tools, the approval of a run that no longer exists
//     (approval_recover.go), live policy reloads (approval_reload.go).
//   - health.go: storage health (degraded after a failed write).
//   - recover*.go: what a restart left unfinished. recover.go (replay of
//     the inbox), recover_replay.go (what a replayed message finds),
//     recover_replies.go (replies the journal shows cut off, marked
//     interrupted).
//   - cluster_*.go: cluster mode. cluster_shared.go (ClusterConfig, the
//     pump), cluster_pumptake.go, cluster_admit.go (one-round-trip
//     admission), cluster_ackretry.go, cluster_resync.go,
//     cluster_located.go, cluster_leave.go (the inbox leaver),
//     cluster_given.go (items handed out before their key was given up),
//     cluster_outage.go and cluster_degraded.go (the shared store down).
package gateway
