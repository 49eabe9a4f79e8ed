package providertest

import (
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/pibot/pibot/llm"
)

// Collect drains a stream and checks pi's event contract: start first,
// block events only between their start and end, exactly one terminal
// done or error, last. It returns the events and the final message.
func Collect(t testing.TB, seq iter.Seq[llm.Event]) ([]llm.Event, *llm.Message) {
	t.Helper()
	var evs []llm.Event
	for e := range seq {
		evs = append(evs, e)
	}
	if err := Check(evs); err != nil {
		t.Fatalf("stream contract: %v\nevents: %s", err, Types(evs))
	}
	return evs, evs[len(evs)-1].Message
}

// Check reports the first violation of the event contract in evs.
func Check(evs []llm.Event) error {
	if len(evs) == 0 {
		return fmt.Errorf("no events")
	}
	if evs[0].Type != llm.EventStart {
		return fmt.Errorf("first event %s, want start", evs[0].Type)
	}
	open := map[int]string{}
	for i, e := range evs[1:] {
		terminal := e.Type == llm.EventDone || e.Type == llm.EventError
		if terminal {
			if i != len(evs)-2 {
				return fmt.Errorf("terminal %s at %d is not last", e.Type, i+1)
			}
			if e.Message == nil {
				return fmt.Errorf("terminal %s without message", e.Type)
			}
			if e.Message.StopReason != e.Reason {
				return fmt.Errorf("reason %s but message stopReason %s", e.Reason, e.Message.StopReason)
			}
			continue
		}
		kind, phase, ok := strings.Cut(string(e.Type), "_")
		if !ok {
			return fmt.Errorf("unexpected event %s", e.Type)
		}
		switch phase {
		case "start":
			if _, dup := open[e.ContentIndex]; dup {
				return fmt.Errorf("block %d started twice", e.ContentIndex)
			}
			open[e.ContentIndex] = kind
		case "delta", "end":
			if open[e.ContentIndex] != kind {
				return fmt.Errorf("%s for block %d that is not an open %s block", e.Type, e.ContentIndex, kind)
			}
			if phase == "end" {
				open[e.ContentIndex] = "closed"
			}
		}
	}
	last := evs[len(evs)-1].Type
	if last != llm.EventDone && last != llm.EventError {
		return fmt.Errorf("no terminal event")
	}
	return nil
}

// Types lists the event types of evs, space separated.
func Types(evs []llm.Event) string {
	s := make([]string, len(evs))
	for i, e := range evs {
		s[i] = string(e.Type)
	}
	return strings.Join(s, " ")
}

// SameUsage reports whether a and b have the same token counts and cost
// (Usage also carries unknown JSON keys and is not comparable with ==).
func SameUsage(a, b llm.Usage) bool {
	return a.Input == b.Input && a.Output == b.Output && a.CacheRead == b.CacheRead &&
		a.CacheWrite == b.CacheWrite && a.TotalTokens == b.TotalTokens && a.Cost == b.Cost
}
