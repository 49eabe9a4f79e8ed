package agent_test

import (
	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
)

// The loop finds SequentialTool by type assertion; the fake tool must keep
// offering it or the tests of sequential batches test nothing.
var (
	_ agent.Tool           = (*agenttest.Tool)(nil)
	_ agent.SequentialTool = (*agenttest.Tool)(nil)
)
