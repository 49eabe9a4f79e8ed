package providers

import (
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/providers/providertest"
)

func TestFallback(t *testing.T) {
	now := time.Unix(1000, 0)
	a := faux.New(llm.ModelInfo{Provider: "a", ID: "a"}, faux.Error("503 service unavailable"), faux.Error("503 service unavailable"), faux.Text("a back"))
	b := faux.New(llm.ModelInfo{Provider: "b", ID: "b"}, faux.Text("from b"))
	f := Fallback([]llm.Model{a, b}, FallbackPolicy{Failures: 2, Cooldown: time.Minute, Now: func() time.Time { return now }})
	req := llm.Request{Messages: []llm.Message{llm.UserText("hi", 1)}}

	for i := range 2 {
		evs, final := providertest.Collect(t, f.Stream(t.Context(), req))
		if final.Text() != "from b" || final.Provider != "b" {
			t.Fatalf("call %d: final = %q from %s (%s)", i, final.Text(), final.Provider, providertest.Types(evs))
		}
	}
	// a failed twice: it cools down and is not even asked.
	providertest.Collect(t, f.Stream(t.Context(), req))
	if a.Calls() != 2 {
		t.Errorf("a called %d times during cooldown, want 2", a.Calls())
	}
	now = now.Add(2 * time.Minute)
	if _, final := providertest.Collect(t, f.Stream(t.Context(), req)); final.Text() != "a back" {
		t.Errorf("after cooldown: %q", final.Text())
	}
	if f.Info().Provider != "a" {
		t.Errorf("info = %+v", f.Info())
	}
}

func TestFallbackKeepsPartialAndLastError(t *testing.T) {
	a := faux.New(llm.ModelInfo{Provider: "a"}, faux.Turn{Text: "half", Err: "connection reset"})
	b := faux.New(llm.ModelInfo{Provider: "b"}, faux.Error("401 bad key"))
	f := Fallback([]llm.Model{a, b}, FallbackPolicy{})
	req := llm.Request{}
	if _, final := providertest.Collect(t, f.Stream(t.Context(), req)); final.Text() != "half" || final.StopReason != llm.StopError || b.Calls() != 0 {
		t.Errorf("partial output must not fall back: %q %s, b calls %d", final.Text(), final.StopReason, b.Calls())
	}
	a2 := faux.New(llm.ModelInfo{Provider: "a"}, faux.Error("overloaded"))
	f = Fallback([]llm.Model{a2, b}, FallbackPolicy{})
	if _, final := providertest.Collect(t, f.Stream(t.Context(), req)); final.ErrorMessage != "401 bad key" {
		t.Errorf("last error not passed through: %q", final.ErrorMessage)
	}
}
