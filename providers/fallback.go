package providers

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/pibot/pibot/llm"
)

// FallbackPolicy tunes a fallback chain.
type FallbackPolicy struct {
	// Failures is how many consecutive failures put a model in cooldown;
	// 0 means 2.
	Failures int
	// Cooldown is how long a failing model is skipped; 0 means 1 minute.
	Cooldown time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// FallbackModel tries its models in order. A model whose call fails before
// any content was produced (stopReason error, not a context overflow) is
// skipped for the next one; after repeated failures it cools down. Once a
// model streams content, its stream is passed through as is.
type FallbackModel struct {
	models []llm.Model
	policy FallbackPolicy

	mu    sync.Mutex
	fails []int
	until []time.Time
}

// Fallback returns a model that falls back along models (at least one).
func Fallback(models []llm.Model, policy FallbackPolicy) *FallbackModel {
	if policy.Failures <= 0 {
		policy.Failures = 2
	}
	if policy.Cooldown <= 0 {
		policy.Cooldown = time.Minute
	}
	if policy.Now == nil {
		policy.Now = time.Now
	}
	return &FallbackModel{models: models, policy: policy, fails: make([]int, len(models)), until: make([]time.Time, len(models))}
}

// Info describes the first model of the chain.
func (f *FallbackModel) Info() llm.ModelInfo { return f.models[0].Info() }

// order returns the indices to try: models not cooling down first, in
// chain order, then cooling ones by earliest recovery.
func (f *FallbackModel) order() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.policy.Now()
	var ready, cooling []int
	for i := range f.models {
		if now.Before(f.until[i]) {
			cooling = append(cooling, i)
		} else {
			ready = append(ready, i)
		}
	}
	for i := 1; i < len(cooling); i++ {
		for j := i; j > 0 && f.until[cooling[j]].Before(f.until[cooling[j-1]]); j-- {
			cooling[j], cooling[j-1] = cooling[j-1], cooling[j]
		}
	}
	return append(ready, cooling...)
}

func (f *FallbackModel) record(i int, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ok {
		f.fails[i] = 0
		return
	}
	f.fails[i]++
	if f.fails[i] >= f.policy.Failures {
		f.until[i] = f.policy.Now().Add(f.policy.Cooldown)
		f.fails[i] = 0
	}
}

// Stream tries each model until one produces content or succeeds; the
// last model's failure is passed through.
func (f *FallbackModel) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		order := f.order()
		for n, i := range order {
			last := n == len(order)-1
			m := f.models[i]
			var held *llm.Event
			forwarded, retry := false, false
			for e := range m.Stream(ctx, req) {
				if !forwarded {
					if e.Type == llm.EventStart {
						ev := e
						held = &ev
						continue
					}
					if e.Type == llm.EventError && !last && e.Reason == llm.StopError && ctx.Err() == nil &&
						e.Message != nil && len(e.Message.Content) == 0 && !llm.IsContextOverflow(*e.Message, 0) {
						retry = true
						break
					}
					forwarded = true
					if held != nil && !yield(*held) {
						return
					}
				}
				if e.Type == llm.EventDone {
					f.record(i, true)
				} else if e.Type == llm.EventError && e.Reason == llm.StopError {
					f.record(i, false)
				}
				if !yield(e) {
					return
				}
			}
			if !retry {
				return
			}
			f.record(i, false)
		}
	}
}
