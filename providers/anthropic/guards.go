package anthropic

import "github.com/pibot/pibot/llm"

// New returns the concrete Model; the registry uses it as an llm.Model.
var _ llm.Model = (*Model)(nil)
