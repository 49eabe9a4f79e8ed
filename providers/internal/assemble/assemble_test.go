package assemble

import (
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
)

func TestFailKeepsPartialToolArguments(t *testing.T) {
	var evs []llm.Event
	b := New(llm.ModelInfo{ID: "m"}, func(e llm.Event) bool { evs = append(evs, e); return true }, func() time.Time { return time.UnixMilli(42) })
	b.Start()
	i, _ := b.Blocks().ToolCallStart("c1", "bash")
	b.Blocks().Delta(i, `{"command":"ls`)
	m := b.Abort()
	if m.StopReason != llm.StopAborted || m.ErrorMessage != AbortedMessage || string(m.Content[0].Arguments) != `{"command":"ls"}` || m.Timestamp != 42 {
		t.Errorf("final = %+v", m)
	}
	if last := evs[len(evs)-1]; last.Type != llm.EventError || last.Reason != llm.StopAborted {
		t.Errorf("last event = %+v", last)
	}
	if b.Blocks().Delta(i, "x") || !b.Stopped() {
		t.Error("events after the terminal event")
	}
}

func TestDoneClosesOpenBlocksAndStopsOnConsumer(t *testing.T) {
	var types []llm.EventType
	b := New(llm.ModelInfo{}, func(e llm.Event) bool { types = append(types, e.Type); return true }, nil)
	b.Start()
	i, _ := b.Blocks().TextStart()
	b.Blocks().Delta(i, "a")
	b.Blocks().Delta(i, "b")
	m := b.Done(llm.StopStop)
	if m.Text() != "ab" || len(types) != 6 || types[4] != llm.EventTextEnd {
		t.Errorf("types = %v text %q", types, m.Text())
	}
	n := 0
	b = New(llm.ModelInfo{}, func(llm.Event) bool { n++; return false }, nil)
	if b.Start() || !b.Stopped() {
		t.Error("consumer stop not seen")
	}
	b.Done(llm.StopStop)
	if n != 1 {
		t.Errorf("events after stop: %d", n)
	}
}
