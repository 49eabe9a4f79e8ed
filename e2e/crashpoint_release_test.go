package e2e

import (
	"bytes"
	"os"
	"testing"

	"github.com/pibot/pibot/internal/crashpoint"
)

// allCrashPoints are the names internal/crashpoint defines.
var allCrashPoints = []string{
	crashpoint.InboxAppend, crashpoint.UserEntry, crashpoint.ToolCall, crashpoint.ToolResult, crashpoint.AnswerEntry,
	crashpoint.PostedPart, crashpoint.ReplyJournal, crashpoint.ReplyFinal, crashpoint.DeliveryRecord, crashpoint.InboxAck,
	crashpoint.Lease, crashpoint.Fence, crashpoint.PumpHandoff, crashpoint.Bound,
	crashpoint.CompactPartial, crashpoint.CompactWritten, crashpoint.CompactRenamed, crashpoint.CompactSynced,
	crashpoint.DedupeSeen,
}

// checkRelease: the binary `go build` makes holds neither the crash
// points' names nor their mechanism (the environment variable that arms
// one, the package itself), so no configuration or environment reaches
// them; the crashpoints build (bin) holds all of them (the check looks
// where they would be).
func checkRelease(t *testing.T, bin string) {
	mechanism := []string{"PIBOT_CRASHPOINT", "PIBOT_CRASHPOINT_INBOX_COMPACT", "internal/crashpoint", "crash point"}
	for _, b := range []struct {
		name, bin string
		has       bool
	}{
		{"release", crashBuild(t), false},
		{"crashpoints", bin, true},
	} {
		exe, err := os.ReadFile(b.bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range append(append([]string(nil), allCrashPoints...), mechanism...) {
			if got := bytes.Contains(exe, []byte(s)); got != b.has {
				t.Errorf("the %s binary holds %q: %v, want %v", b.name, s, got, b.has)
			}
		}
	}
}
