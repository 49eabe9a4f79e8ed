package gateway

import (
	"testing"

	"github.com/pibot/pibot/chat"
)

// TestSetApprovalsSwapsPolicies: a reload's tables apply to the next
// check, and changing the maps given afterwards changes nothing.
func TestSetApprovalsSwapsPolicies(t *testing.T) {
	dm, group := chat.ConvRef{Platform: "test", Channel: "d", DM: true}, chat.ConvRef{Platform: "test", Channel: "g"}
	a := newApprovals(approvalDeps{policy: approvalPolicy{dm: map[string]string{}, group: map[string]string{"bash": "ask"}}})
	if got := a.policy(group, "bash"); got != "ask" {
		t.Fatalf("before reload: %s", got)
	}
	newGroup := map[string]string{"*": "deny"}
	a.setTables(map[string]string{"bash": "ask"}, newGroup)
	newGroup["*"] = "allow" // the caller's map is not shared
	for _, tc := range []struct {
		conv       chat.ConvRef
		tool, want string
	}{{group, "bash", "deny"}, {group, "read", "deny"}, {dm, "bash", "ask"}, {dm, "read", "allow"}} {
		if got := a.policy(tc.conv, tc.tool); got != tc.want {
			t.Errorf("after reload %s in DM=%v: %s, want %s", tc.tool, tc.conv.DM, got, tc.want)
		}
	}
}
