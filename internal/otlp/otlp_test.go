package otlp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/internal/otlp"
)

// collector is a fake OTLP/HTTP receiver that keeps the spans it got.
type collector struct {
	mu     sync.Mutex
	spans  []map[string]any
	res    []any
	status int
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var body struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []any `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Spans []map[string]any `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status != 0 {
		w.WriteHeader(c.status)
		return
	}
	for _, rs := range body.ResourceSpans {
		c.res = append(c.res, rs.Resource.Attributes...)
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
}

func (c *collector) got() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.spans...)
}

func newTracer(t *testing.T, c *collector, mod func(*otlp.Config)) *otlp.Tracer {
	t.Helper()
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	cfg := otlp.Config{Endpoint: srv.URL + "/", Version: "v1.2.3", Interval: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	tr, err := otlp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestSpansExported(t *testing.T) {
	c := &collector{}
	tr := newTracer(t, c, nil)
	ctx, root := tr.Start(context.Background(), "pibot.intake")
	root.Set("pibot.platform", "slack")
	root.Set("pibot.files", 2)
	root.Set("pibot.dm", true)
	_, child := tr.Start(ctx, "pibot.dedupe")
	child.Fail(errors.New("store down"))
	child.End()
	root.End()
	root.End() // once only
	// Across the inbox: the run continues the trace from a traceparent.
	_, run := tr.StartRemote(context.Background(), "pibot.run", root.Traceparent())
	run.End()
	tr.Flush(context.Background())

	spans := c.got()
	if len(spans) != 3 {
		t.Fatalf("spans = %d, want 3: %v", len(spans), spans)
	}
	byName := map[string]map[string]any{}
	for _, s := range spans {
		byName[s["name"].(string)] = s
	}
	in, dd, rn := byName["pibot.intake"], byName["pibot.dedupe"], byName["pibot.run"]
	if len(in["traceId"].(string)) != 32 || len(in["spanId"].(string)) != 16 || in["parentSpanId"] != nil {
		t.Errorf("root ids: %v", in)
	}
	for _, s := range []map[string]any{dd, rn} {
		if s["traceId"] != in["traceId"] || s["parentSpanId"] != in["spanId"] {
			t.Errorf("%s is not a child of the intake span: %v", s["name"], s)
		}
	}
	if st := dd["status"].(map[string]any); st["code"] != float64(2) || st["message"] != "store down" {
		t.Errorf("failed span status: %v", st)
	}
	attrs, _ := json.Marshal(in["attributes"])
	for _, w := range []string{`{"key":"pibot.platform","value":{"stringValue":"slack"}}`, `{"key":"pibot.files","value":{"intValue":"2"}}`, `{"key":"pibot.dm","value":{"boolValue":true}}`} {
		if !strings.Contains(string(attrs), w) {
			t.Errorf("attributes %s lack %s", attrs, w)
		}
	}
	if s, e := in["startTimeUnixNano"].(string), in["endTimeUnixNano"].(string); s == "" || e < s {
		t.Errorf("times %q %q", s, e)
	}
	res, _ := json.Marshal(c.res)
	if !strings.Contains(string(res), `"service.name","value":{"stringValue":"pibot"}`) || !strings.Contains(string(res), "v1.2.3") {
		t.Errorf("resource %s", res)
	}
}

// A nil tracer does nothing, and allocates nothing.
func TestNilTracerCostsNothing(t *testing.T) {
	var tr *otlp.Tracer
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, s := tr.Start(ctx, "x")
		s.Set("k", "v")
		s.Fail(errors.New("e"))
		_, s2 := tr.StartRemote(c, "y", s.Traceparent())
		s2.End()
		s.End()
	})
	if allocs > 1 { // errors.New
		t.Errorf("a nil tracer allocated %.0f times per span", allocs)
	}
}

func TestBadTraceparentStartsATrace(t *testing.T) {
	c := &collector{}
	tr := newTracer(t, c, nil)
	for _, tp := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01", "01-abc-def-01"} {
		_, s := tr.StartRemote(context.Background(), "pibot.run", tp)
		s.End()
	}
	tr.Flush(context.Background())
	for _, s := range c.got() {
		if s["parentSpanId"] != nil || len(s["traceId"].(string)) != 32 || s["traceId"] == strings.Repeat("0", 32) {
			t.Errorf("span from a bad traceparent: %v", s)
		}
	}
}

// A collector that fails or a full queue loses spans, never blocks.
func TestExportFailuresDropSpans(t *testing.T) {
	c := &collector{status: http.StatusServiceUnavailable}
	tr := newTracer(t, c, func(cfg *otlp.Config) { cfg.MaxQueue = 4 })
	for range 10 {
		_, s := tr.Start(context.Background(), "x")
		s.End()
	}
	tr.Flush(context.Background())
	c.mu.Lock()
	c.status = 0
	c.mu.Unlock()
	tr.Flush(context.Background())
	if n := len(c.got()); n != 0 {
		t.Errorf("%d spans arrived after a failed export and a full queue, want the failed batch dropped", n)
	}
	_, s := tr.Start(context.Background(), "after")
	s.End()
	tr.Flush(context.Background())
	if n := len(c.got()); n != 1 {
		t.Errorf("after recovery %d spans, want 1", n)
	}
}

func TestRunFlushesOnStop(t *testing.T) {
	c := &collector{}
	tr := newTracer(t, c, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tr.Run(ctx) }()
	_, s := tr.Start(context.Background(), "last")
	s.End()
	cancel()
	<-done
	if n := len(c.got()); n != 1 {
		t.Errorf("spans after Run ended = %d, want 1", n)
	}
}

func TestNewRejectsBadEndpoint(t *testing.T) {
	if _, err := otlp.New(otlp.Config{Endpoint: "collector:4318"}); err == nil {
		t.Error("an endpoint without a scheme was accepted")
	}
}
