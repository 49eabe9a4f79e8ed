package cluster

import (
	"encoding/json"
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
