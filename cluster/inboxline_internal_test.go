package cluster

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestInboxLineIsMarshalAndNewline: a record's line is json.Marshal's
// bytes (HTML escaped, data compacted) and a newline; invalid data is an
// error.
func TestInboxLineIsMarshalAndNewline(t *testing.T) {
	for _, r := range []inboxRecord{
		{Op: "add", ID: "0123456789abcdef", Key: "slack:T1:C1", Data: json.RawMessage(`{"in": {"text": "a <b> & c\u2028"}, "n": [1, 2]}`)},
		{Op: "ack", ID: "0123456789abcdef", Key: "web:<x>"},
		{Op: "clean"},
	} {
		got, err := r.line()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(r)
		if string(got) != string(want)+"\n" {
			t.Errorf("line = %q, want %q", got, string(want)+"\n")
		}
	}
	if _, err := (inboxRecord{Op: "add", Data: json.RawMessage(`{"unclosed":`)}).line(); err == nil {
		t.Error("invalid data: no error")
	}
}

// TestSnapshotEncodesEachRecordAsMarshal: a compaction's file is the
// records json.Marshal encodes, a line each, whatever the buffer it is
// encoded into was sized for.
func TestSnapshotEncodesEachRecordAsMarshal(t *testing.T) {
	snap := inboxSnapshot{
		held: []InboxItem{{ID: "q1", Key: "web:<x>", Data: json.RawMessage(`{"in":{"text":"a <b> & c\u2028"}}`), Crashes: 3}},
		pending: []InboxItem{
			{ID: "p1", Key: "slack:T1:C1", Data: json.RawMessage(`{"n":[1,2]}`)},
			{ID: "p2", Key: "k", Data: json.RawMessage(`"` + strings.Repeat("x", 5000) + `"`), Crashes: 1},
		},
		running: []bool{false, true},
	}
	var want []byte
	for _, r := range []inboxRecord{
		{Op: "held", ID: "q1", Key: "web:<x>", Data: snap.held[0].Data, Crashes: 3},
		{Op: "keep", ID: "p1", Key: "slack:T1:C1", Data: snap.pending[0].Data},
		{Op: "keep", ID: "p2", Key: "k", Data: snap.pending[1].Data, Crashes: 1},
		{Op: "run", ID: "p2", Key: "k"},
	} {
		line, _ := json.Marshal(r)
		want = append(append(want, line...), '\n')
	}
	if got := snap.encode(); string(got) != string(want) {
		t.Errorf("encode =\n%s\nwant\n%s", got, want)
	}
}
