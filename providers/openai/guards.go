package openai

import "github.com/pibot/pibot/llm"

// The constructors return concrete models; the registry uses them as
// llm.Model.
var (
	_ llm.Model = (*Completions)(nil)
	_ llm.Model = (*Responses)(nil)
)
