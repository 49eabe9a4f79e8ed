package chat

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// An inbound press waits in a durable inbox as JSON and is answered by
// another replica: the handle and the message's Handle survive.
func TestInteractionSurvivesJSON(t *testing.T) {
	conv := ConvRef{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "1700000000.000100"}
	msg := MsgRef{Conv: conv, ID: "1700000001.000200", Handle: "opaque-token"}
	in := Inbound{
		Kind:   KindAction,
		Conv:   conv,
		Action: &Action{Data: "ap:1", Msg: msg},
		Interaction: &Interaction{Platform: "slack", ID: "trig", Token: "tok", ResponseURL: "https://hooks.example/r",
			Conv: conv, Msg: msg, User: "U1", Deadline: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Data: "x"},
		Bound: true,
	}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Inbound
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}
	if msg.Key() != (MsgRef{Conv: conv, ID: msg.ID}).Key() {
		t.Error("Handle changed the message key")
	}
}

func TestInteractionExpired(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, tt := range []struct {
		deadline time.Time
		want     bool
	}{
		{time.Time{}, false},
		{now.Add(time.Second), false},
		{now, true},
		{now.Add(-time.Second), true},
	} {
		if got := (Interaction{Deadline: tt.deadline}).Expired(now); got != tt.want {
			t.Errorf("Expired with deadline %v = %v, want %v", tt.deadline, got, tt.want)
		}
	}
}
