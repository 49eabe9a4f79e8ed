package compaction

// The prompts below follow the structure pi documents for its summaries
// (section headings and checklists); the wording is pibot's own.

// SystemPrompt is the system prompt of every summarization call.
const SystemPrompt = `You are a context summarization assistant. Your task is to read a conversation between a user and an AI coding assistant, then produce a structured summary following the exact format specified.

Do NOT continue the conversation. Do NOT respond to any questions in the conversation. ONLY output the structured summary.`

const summaryFormat = `## Goal
[What the user is trying to accomplish; several goals as a list if needed]

## Constraints & Preferences
- [Requirements, preferences and constraints the user stated]

## Progress
### Done
- [x] [Completed work]

### In Progress
- [ ] [Work that has started]

### Blocked
- [Open problems, if any]

## Key Decisions
- **[Decision]**: [Short rationale]

## Next Steps
1. [What should happen next, in order]

## Critical Context
- [Data, references or facts needed to continue]

Keep each section concise. Preserve exact file paths, function names, and error messages.`

// initialPrompt asks for a first summary.
const initialPrompt = `The messages above are a conversation to summarize. Create a structured context checkpoint summary that another LLM will use to continue the work.

Use this EXACT format:

` + summaryFormat

// updatePrompt asks to merge new messages into a previous summary.
const updatePrompt = `The messages above are NEW conversation messages to incorporate into the existing summary provided in <previous-summary> tags.

Update the existing structured summary with the new information. Rules:
- PRESERVE all existing information from the previous summary
- ADD new progress, decisions and context from the new messages
- UPDATE the Progress section: move items from "In Progress" to "Done" when they are completed
- UPDATE "Next Steps" based on what was accomplished
- PRESERVE exact file paths, function names, and error messages
- If something is no longer relevant, you may remove it

Use this EXACT format:

` + summaryFormat

// turnPrefixPrompt summarizes the first part of a turn that was cut.
const turnPrefixPrompt = `This is the PREFIX of a turn that was too large to keep. The SUFFIX (recent work) is kept in full.

Summarize the prefix to provide context for the retained suffix:

## Original Request
[What the user asked for in this turn]

## Early Progress
- [Key decisions and work done in the prefix]

## Context for Suffix
- [Information needed to understand the retained recent work]

Be concise. Focus on what is needed to understand the kept suffix.`

// branchPrompt summarizes an abandoned branch.
const branchPrompt = `Create a structured summary of this conversation branch for context when returning later.

Use this EXACT format:

## Goal
[What the user was trying to accomplish in this branch]

## Constraints & Preferences
- [Requirements and preferences the user stated]

## Progress
### Done
- [x] [Completed work]

### In Progress
- [ ] [Work that had started]

### Blocked
- [Open problems, if any]

## Key Decisions
- **[Decision]**: [Short rationale]

## Next Steps
1. [What should happen next to continue this work]

Keep each section concise. Preserve exact file paths, function names, and error messages.`

// BranchSummaryPreamble starts every branch summary.
const BranchSummaryPreamble = "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n"

// splitTurnSeparator joins the history summary and the turn-prefix summary.
const splitTurnSeparator = "\n\n---\n\n**Turn Context (split turn):**\n\n"

// noPriorHistory stands in for the history summary of a split turn that
// has nothing before it.
const noPriorHistory = "No prior history."
