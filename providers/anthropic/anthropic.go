// Package anthropic streams from the Anthropic Messages API
// ("anthropic-messages"): text, extended thinking (budgeted and adaptive)
// with signatures and redacted thinking kept for replay, tool use and
// prompt caching. It is a small client of its own over net/http (the
// request body in wire.go, the event stream in stream.go); failed
// attempts are classified and retried by pibot's RetryPolicy
// (providers/internal/transport).
package anthropic

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"strings"

	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/assemble"
	"github.com/pibot/pibot/providers/internal/transport"
)

// API is the wire protocol name.
const API = "anthropic-messages"

// DefaultBaseURL is Anthropic's API root.
const DefaultBaseURL = "https://api.anthropic.com"

// Version is the anthropic-version header sent with every request.
const Version = "2023-06-01"

// Config configures one model.
type Config struct {
	Info    llm.ModelInfo
	BaseURL string
	APIKey  secret.Secret
	Headers map[string]string
	HTTP    *http.Client
	Logger  *slog.Logger
	Retry   transport.RetryPolicy
	// KeySource names where APIKey comes from, for the hint of a
	// rejected key.
	KeySource string
}

// Model is an Anthropic Messages model.
type Model struct {
	info    llm.ModelInfo
	url     string // the messages endpoint
	apiKey  secret.Secret
	headers map[string]string
	http    *http.Client
	client  *transport.Client
}

// Root is the API root the calls go to (ROOT/v1/messages, ROOT/v1/models),
// resolved from a provider's base_url: DefaultBaseURL when empty, without
// a trailing slash or /v1. `pibot doctor` lists the models there.
func Root(baseURL string) string {
	u := strings.TrimSuffix(strings.TrimRight(baseURL, "/"), "/v1")
	if u == "" {
		return DefaultBaseURL
	}
	return u
}

// New returns a model for cfg. Credentials and base URL come from cfg
// only, never from the ANTHROPIC_* environment.
func New(cfg Config) *Model {
	u := Root(cfg.BaseURL)
	cfg.Info.API = API
	cfg.Info.BaseURL = u
	hc := cfg.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Model{
		info:    cfg.Info,
		url:     u + "/v1/messages",
		apiKey:  cfg.APIKey,
		headers: cfg.Headers,
		http:    hc,
		client: &transport.Client{
			Provider:  cfg.Info.Provider,
			Retry:     cfg.Retry,
			Logger:    cfg.Logger,
			Secrets:   []secret.Secret{cfg.APIKey},
			BaseURL:   u,
			KeySource: cfg.KeySource,
		},
	}
}

// Info returns the model description.
func (m *Model) Info() llm.ModelInfo { return m.info }

// Stream calls the model and yields pi's events.
func (m *Model) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		b := assemble.New(m.info, yield, nil)
		body, err := m.encode(req)
		if err != nil {
			if b.Start() {
				b.Fail(llm.StopError, fmt.Sprintf("%s: encode request: %v", m.info.Provider, err))
			}
			return
		}
		var stream io.ReadCloser
		err = m.client.Do(ctx, func(ctx context.Context) error {
			resp, err := m.post(ctx, body)
			if err != nil {
				return m.client.Failure(nil, err)
			}
			if resp.StatusCode >= 300 {
				return m.client.Failure(resp, nil)
			}
			stream = resp.Body
			return nil
		})
		if err != nil {
			if b.Start() {
				b.FailErr(ctx, err)
			}
			return
		}
		defer stream.Close()
		if !b.Start() {
			return
		}
		m.read(ctx, b, newEvents(stream))
	}
}

// post sends one attempt of the request.
func (m *Model) post(ctx context.Context, body []byte) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := hreq.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	h.Set("Anthropic-Version", Version)
	if !m.apiKey.IsZero() {
		// Anthropic documents API keys in x-api-key, not a bearer token.
		h.Set("X-Api-Key", m.apiKey.Reveal())
	}
	for k, v := range m.headers {
		h.Set(k, v)
	}
	return m.http.Do(hreq)
}
