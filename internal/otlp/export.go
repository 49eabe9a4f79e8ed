package otlp

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config configures a Tracer.
type Config struct {
	// Endpoint is the collector's base URL (http://collector:4318); spans
	// go to Endpoint + "/v1/traces".
	Endpoint string
	// Service is the service.name resource attribute (default "pibot").
	Service string
	// Version is the service.version resource attribute.
	Version string
	// Client sends the requests (default: one with a 10 s timeout).
	Client *http.Client
	// Interval is how often queued spans are sent (default 5 s).
	Interval time.Duration
	// MaxQueue bounds the spans waiting for export (default 2048); spans
	// beyond it are dropped and counted.
	MaxQueue int
	Logger   *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Tracer makes spans and exports them in batches from Run.
type Tracer struct {
	cfg  Config
	url  string
	now  func() time.Time
	log  *slog.Logger
	kick chan struct{}

	mu      sync.Mutex
	queue   []spanJSON
	dropped int
}

// New returns a tracer for cfg; Run must run for spans to leave.
func New(cfg Config) (*Tracer, error) {
	if !strings.HasPrefix(cfg.Endpoint, "http://") && !strings.HasPrefix(cfg.Endpoint, "https://") {
		return nil, fmt.Errorf("otlp: endpoint %q is not an http(s) URL", cfg.Endpoint)
	}
	if cfg.Service == "" {
		cfg.Service = "pibot"
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 2048
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Tracer{cfg: cfg, url: strings.TrimSuffix(cfg.Endpoint, "/") + "/v1/traces", now: cfg.Now, log: cfg.Logger,
		kick: make(chan struct{}, 1)}, nil
}

// Run exports queued spans every Interval (and when the queue is half
// full) until ctx ends, then sends what is left, giving it up to 5 s.
func (t *Tracer) Run(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			t.Flush(fctx)
			cancel()
			return
		case <-tick.C:
		case <-t.kick:
		}
		t.Flush(ctx)
	}
}

// Flush sends the queued spans now. A failed export is logged and its
// spans are dropped (tracing never holds up or fails pibot's work).
func (t *Tracer) Flush(ctx context.Context) {
	t.mu.Lock()
	batch, dropped := t.queue, t.dropped
	t.queue, t.dropped = nil, 0
	t.mu.Unlock()
	if dropped > 0 {
		t.log.Warn("otlp: export queue full; spans dropped", "dropped", dropped)
	}
	if len(batch) == 0 {
		return
	}
	if err := t.send(ctx, batch); err != nil {
		t.log.Warn("otlp: export failed; spans dropped", "spans", len(batch), "err", err)
	}
}

func (t *Tracer) enqueue(s spanJSON) {
	t.mu.Lock()
	if len(t.queue) >= t.cfg.MaxQueue {
		t.dropped++
		t.mu.Unlock()
		return
	}
	t.queue = append(t.queue, s)
	half := len(t.queue) == t.cfg.MaxQueue/2
	t.mu.Unlock()
	if half {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

func (t *Tracer) send(ctx context.Context, batch []spanJSON) error {
	res := []kv{strAttr("service.name", t.cfg.Service)}
	if t.cfg.Version != "" {
		res = append(res, strAttr("service.version", t.cfg.Version))
	}
	body, err := json.Marshal(exportJSON{ResourceSpans: []resourceSpans{{
		Resource:   resource{Attributes: res},
		ScopeSpans: []scopeSpans{{Scope: scope{Name: "github.com/pibot/pibot"}, Spans: batch}},
	}}})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return errors.New("collector answered " + resp.Status)
	}
	return nil
}

// The OTLP/HTTP JSON shapes (opentelemetry-proto's JSON mapping: ids in
// hex, 64-bit integers as strings).
type (
	exportJSON struct {
		ResourceSpans []resourceSpans `json:"resourceSpans"`
	}
	resourceSpans struct {
		Resource   resource     `json:"resource"`
		ScopeSpans []scopeSpans `json:"scopeSpans"`
	}
	resource struct {
		Attributes []kv `json:"attributes"`
	}
	scopeSpans struct {
		Scope scope      `json:"scope"`
		Spans []spanJSON `json:"spans"`
	}
	scope struct {
		Name string `json:"name"`
	}
	spanJSON struct {
		TraceID      string `json:"traceId"`
		SpanID       string `json:"spanId"`
		ParentSpanID string `json:"parentSpanId,omitempty"`
		Name         string `json:"name"`
		Kind         int    `json:"kind"`
		Start        string `json:"startTimeUnixNano"`
		End          string `json:"endTimeUnixNano"`
		Attributes   []kv   `json:"attributes,omitempty"`
		Status       status `json:"status"`
	}
	status struct {
		Code    int    `json:"code,omitempty"` // 2: error
		Message string `json:"message,omitempty"`
	}
	kv struct {
		Key   string         `json:"key"`
		Value map[string]any `json:"value"`
	}
)

func strAttr(k, v string) kv { return kv{Key: k, Value: map[string]any{"stringValue": v}} }

// recordLocked renders the span for export.
func (s *Span) recordLocked(end time.Time) spanJSON {
	out := spanJSON{
		TraceID: hex.EncodeToString(s.traceID[:]),
		SpanID:  hex.EncodeToString(s.spanID[:]),
		Name:    s.name,
		Kind:    1, // internal
		Start:   strconv.FormatInt(s.start.UnixNano(), 10),
		End:     strconv.FormatInt(end.UnixNano(), 10),
	}
	if s.parent != [8]byte{} {
		out.ParentSpanID = hex.EncodeToString(s.parent[:])
	}
	for _, a := range s.attrs {
		switch v := a.val.(type) {
		case string:
			out.Attributes = append(out.Attributes, strAttr(a.key, v))
		case int64:
			out.Attributes = append(out.Attributes, kv{Key: a.key, Value: map[string]any{"intValue": strconv.FormatInt(v, 10)}})
		case bool:
			out.Attributes = append(out.Attributes, kv{Key: a.key, Value: map[string]any{"boolValue": v}})
		}
	}
	if s.err != "" {
		out.Status = status{Code: 2, Message: s.err}
	}
	return out
}
