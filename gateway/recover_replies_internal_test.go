package gateway

import (
	"encoding/json"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/session"
)

// TestReclaimLeavesALiveReplyAlone: a session's holder that claims items
// (its periodic reclaim, or a retake after a lost answer) while its own
// run streams a reply at the location does not mark that reply
// interrupted: only a reply nobody streams any more was cut off.
func TestReclaimLeavesALiveReplyAlone(t *testing.T) {
	g := newBareGateway(t)
	conv := chat.ConvRef{Platform: "test", Channel: "c1", DM: true}
	o, loc, err := g.sessions.locate(t.Context(), chat.Inbound{Conv: conv})
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	data, _ := json.Marshal(replyRecord{Refs: []chat.MsgRef{{Conv: conv, ID: "m1"}}, State: replyStreaming})
	if _, err := o.append(loc, session.Entry{Type: session.TypeCustom, CustomType: customReply, Data: data}, session.SyncWritten); err != nil {
		t.Fatal(err)
	}
	item, _ := json.Marshal(inboxItem{In: chat.Inbound{Conv: conv, Text: "claimed"}})
	items := []cluster.InboxItem{{Key: conv.Key(), ID: "1-1", Data: item}}

	o.mu.Lock()
	loc.run = &run{} // a run of this process streams the reply
	o.mu.Unlock()
	g.recovery.markInterrupted(t.Context(), items)
	if _, open := o.view(loc).openReply(); !open {
		t.Fatal("a reply its run still streams was marked interrupted by a claim")
	}

	o.mu.Lock()
	loc.run = nil // the run is gone: the reply was cut off
	o.mu.Unlock()
	g.recovery.markInterrupted(t.Context(), items)
	if _, open := o.view(loc).openReply(); open {
		t.Fatal("a reply nobody streams any more was not marked interrupted")
	}
}
