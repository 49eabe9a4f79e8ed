package providers

import "github.com/pibot/pibot/llm"

// FallbackModel is handed out wherever an llm.Model is expected.
var _ llm.Model = (*FallbackModel)(nil)
