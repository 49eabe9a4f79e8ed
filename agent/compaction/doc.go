// Package compaction implements pi's context compaction: the threshold
// check, token estimation, the cut-point rules that decide which entries of
// a session branch are summarized and which are kept, the summary prompts
// and their LLM calls, read/modified file tracking, and branch summaries
// written when the user moves to another branch of the session tree.
//
// The package works on a minimal view of session entries ([BranchEntry]) so
// that it does not depend on the session store: callers convert their
// entries, call [Prepare] and [Compact] (or [SummarizeBranch]) and write the
// result back themselves. The only I/O is the [llm.Model] it is given.
package compaction
