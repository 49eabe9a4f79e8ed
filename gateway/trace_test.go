package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/internal/otlp"
	"github.com/pibot/pibot/providers/faux"
)

// TestMessageTrace: with a tracer, a message's intake span and the span of
// the run that answers it form one trace, the run a child of the intake
// (joined through the inbox item), as an OTLP collector receives them.
func TestMessageTrace(t *testing.T) {
	type span struct {
		TraceID, SpanID, ParentSpanID, Name string
	}
	var mu sync.Mutex
	var spans []span
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body struct {
			ResourceSpans []struct {
				ScopeSpans []struct{ Spans []span }
			}
		}
		if err := json.Unmarshal(b, &body); err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range body.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
	}))
	defer srv.Close()
	tr, err := otlp.New(otlp.Config{Endpoint: srv.URL, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, []faux.Turn{faux.Text("traced answer")}, withConfig(func(c *gateway.Config) { c.Tracer = tr }))
	h.send("hello")
	h.waitText(dmConv, "traced answer")
	h.waitFor("the run's end", func() bool { return len(pendingOf(h)) == 0 })
	tr.Flush(context.Background())

	mu.Lock()
	defer mu.Unlock()
	byName := map[string]span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	in, run := byName["pibot.intake"], byName["pibot.run"]
	if in.SpanID == "" || run.SpanID == "" {
		t.Fatalf("spans %+v: want pibot.intake and pibot.run", spans)
	}
	if run.TraceID != in.TraceID || run.ParentSpanID != in.SpanID {
		t.Errorf("run span %+v is not the intake span's child (%+v)", run, in)
	}
}
