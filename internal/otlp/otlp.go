// Package otlp records trace spans and exports them to an OpenTelemetry
// collector over OTLP/HTTP with JSON encoding (POST {endpoint}/v1/traces),
// written with the standard library alone.
//
// A nil *Tracer is valid and does nothing: Start returns the context it
// got and a nil *Span, whose methods do nothing, so tracing costs a nil
// check when it is off. Span contexts travel between processes and
// through pibot's inbox as W3C traceparent strings.
package otlp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Span is one timed operation. Its methods are safe on a nil *Span.
type Span struct {
	t       *Tracer
	traceID [16]byte
	spanID  [8]byte
	parent  [8]byte // zero: a root span
	name    string
	start   time.Time

	mu    sync.Mutex
	attrs []attr
	err   string
	ended bool
}

type attr struct {
	key string
	val any // string, int64 or bool
}

type spanKey struct{}

// Start begins a span named name, a child of the span in ctx (if any),
// and returns ctx carrying it.
func (t *Tracer) Start(ctx context.Context, name string) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	s := t.newSpan(name)
	if p, ok := ctx.Value(spanKey{}).(*Span); ok && p != nil {
		s.traceID, s.parent = p.traceID, p.spanID
	} else {
		_, _ = rand.Read(s.traceID[:])
	}
	return context.WithValue(ctx, spanKey{}, s), s
}

// StartRemote begins a span whose parent is given as a W3C traceparent
// (from another process or an inbox record); an empty or malformed one
// starts a new trace.
func (t *Tracer) StartRemote(ctx context.Context, name, traceparent string) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	tid, sid, ok := parseTraceparent(traceparent)
	if !ok {
		return t.Start(ctx, name)
	}
	s := t.newSpan(name)
	s.traceID, s.parent = tid, sid
	return context.WithValue(ctx, spanKey{}, s), s
}

func (t *Tracer) newSpan(name string) *Span {
	s := &Span{t: t, name: name, start: t.now()}
	_, _ = rand.Read(s.spanID[:])
	return s
}

// Set records an attribute: a string, an int, an int64 or a bool (other
// values are formatted with %v).
func (s *Span) Set(key string, value any) {
	if s == nil {
		return
	}
	switch v := value.(type) {
	case string, int64, bool:
	case int:
		value = int64(v)
	default:
		value = fmt.Sprint(v)
	}
	s.mu.Lock()
	s.attrs = append(s.attrs, attr{key, value})
	s.mu.Unlock()
}

// Fail marks the span as failed with err's message (nil: nothing).
func (s *Span) Fail(err error) {
	if s == nil || err == nil {
		return
	}
	s.mu.Lock()
	s.err = err.Error()
	s.mu.Unlock()
}

// End ends the span and queues it for export; later calls do nothing.
func (s *Span) End() {
	if s == nil {
		return
	}
	end := s.t.now()
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	rec := s.recordLocked(end)
	s.mu.Unlock()
	s.t.enqueue(rec)
}

// Traceparent is the span's W3C traceparent ("" for a nil span).
func (s *Span) Traceparent() string {
	if s == nil {
		return ""
	}
	return "00-" + hex.EncodeToString(s.traceID[:]) + "-" + hex.EncodeToString(s.spanID[:]) + "-01"
}

// parseTraceparent reads "00-<32 hex>-<16 hex>-<2 hex>".
func parseTraceparent(s string) (tid [16]byte, sid [8]byte, ok bool) {
	f := strings.Split(s, "-")
	if len(f) != 4 || f[0] != "00" || len(f[1]) != 32 || len(f[2]) != 16 || len(f[3]) != 2 {
		return tid, sid, false
	}
	if _, err := hex.Decode(tid[:], []byte(f[1])); err != nil || tid == [16]byte{} {
		return tid, sid, false
	}
	if _, err := hex.Decode(sid[:], []byte(f[2])); err != nil || sid == [8]byte{} {
		return tid, sid, false
	}
	return tid, sid, true
}
