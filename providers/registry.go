package providers

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/anthropic"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/providers/internal/transport"
	"github.com/pibot/pibot/providers/openai"
)

// Options are shared by every model a Registry builds.
type Options struct {
	// HTTPClient sends requests; nil means http.DefaultClient. Each
	// provider's Timeouts are applied around its transport.
	HTTPClient *http.Client
	// Logger receives retry warnings; nil discards.
	Logger *slog.Logger
	Retry  RetryPolicy
	// FauxDelay is the per-token delay of configured faux models (demo
	// streaming); 0 means 30ms, negative none.
	FauxDelay time.Duration
}

// ModelStatus is one configured model and whether it can be called.
type ModelStatus struct {
	Info           llm.ModelInfo
	HasCredentials bool
}

// Registry resolves "provider/model" references to models.
type Registry struct {
	providers map[string]Config
	order     []string
	opts      Options

	mu    sync.Mutex
	fauxs map[string]*faux.Model // scripted faux models, so scripts advance across runs
}

// NewRegistry checks cfgs and returns a registry over them.
func NewRegistry(cfgs []Config, opts Options) (*Registry, error) {
	r := &Registry{providers: map[string]Config{}, opts: opts}
	for _, c := range cfgs {
		if c.Name == "" {
			return nil, fmt.Errorf("providers: a provider has no name")
		}
		if strings.Contains(c.Name, "/") {
			return nil, fmt.Errorf("providers: provider name %q contains '/'", c.Name)
		}
		if _, dup := r.providers[c.Name]; dup {
			return nil, fmt.Errorf("providers: provider %q configured twice", c.Name)
		}
		seen := map[string]bool{}
		for i, m := range c.Models {
			if m.ID == "" {
				return nil, fmt.Errorf("providers: %s: model %d has no id", c.Name, i+1)
			}
			if seen[m.ID] {
				return nil, fmt.Errorf("providers: %s: model %q listed twice", c.Name, m.ID)
			}
			seen[m.ID] = true
			if err := checkAPI(apiOf(c, m)); err != nil {
				return nil, fmt.Errorf("providers: %s/%s: %w", c.Name, m.ID, err)
			}
		}
		if c.API == "" && len(c.Models) == 0 {
			return nil, fmt.Errorf("providers: %s: no api and no models", c.Name)
		}
		if c.API != "" {
			if err := checkAPI(c.API); err != nil {
				return nil, fmt.Errorf("providers: %s: %w", c.Name, err)
			}
		}
		if c.API == APIFaux && len(c.Models) == 0 {
			c.Models = []llm.ModelInfo{{ID: "echo", Name: "Faux echo"}}
		}
		r.providers[c.Name] = c
		r.order = append(r.order, c.Name)
	}
	return r, nil
}

var apis = []string{APIOpenAICompletions, APIOpenAIResponses, APIAnthropic, APIFaux}

func checkAPI(api string) error {
	if !slices.Contains(apis, api) {
		return fmt.Errorf("unknown api %q (want one of %s)", api, strings.Join(apis, ", "))
	}
	return nil
}

func apiOf(c Config, m llm.ModelInfo) string {
	if m.API != "" {
		return m.API
	}
	return c.API
}

// info fills the defaults of a configured model, like pi's models.json.
func info(c Config, m llm.ModelInfo) llm.ModelInfo {
	m.Provider = c.Name
	m.API = apiOf(c, m)
	if m.BaseURL == "" {
		m.BaseURL = c.BaseURL
	}
	if m.Name == "" {
		m.Name = m.ID
	}
	if len(m.Input) == 0 {
		m.Input = []string{"text"}
	}
	if m.ContextWindow == 0 {
		m.ContextWindow = 128000
	}
	if m.MaxTokens == 0 {
		m.MaxTokens = 16384
	}
	return m
}

// Model returns the model for ref "provider/id" (the id may contain '/').
// A configured model without a needed key yields an error wrapping
// llm.ErrNoCredentials.
func (r *Registry) Model(ref string) (llm.Model, error) {
	name, id, ok := strings.Cut(ref, "/")
	if !ok || name == "" || id == "" {
		return nil, fmt.Errorf("providers: model reference %q is not \"provider/model\"", ref)
	}
	c, ok := r.providers[name]
	if !ok {
		return nil, fmt.Errorf("providers: provider %q is not configured (have: %s)", name, strings.Join(r.order, ", "))
	}
	i := slices.IndexFunc(c.Models, func(m llm.ModelInfo) bool { return m.ID == id })
	if i < 0 && c.API == APIFaux {
		// A faux provider answers under any model id.
		return r.build(c, info(c, llm.ModelInfo{ID: id})), nil
	}
	if i < 0 {
		ids := make([]string, len(c.Models))
		for j, m := range c.Models {
			ids[j] = m.ID
		}
		return nil, fmt.Errorf("providers: model %q is not configured for provider %q (have: %s)", id, name, strings.Join(ids, ", "))
	}
	if c.needsKey() && c.APIKey.IsZero() {
		return nil, fmt.Errorf("providers: %s: %w: set api_key for provider %q", ref, llm.ErrNoCredentials, name)
	}
	return r.build(c, info(c, c.Models[i])), nil
}

func (r *Registry) build(c Config, mi llm.ModelInfo) llm.Model {
	o := r.opts
	switch mi.API {
	case APIOpenAICompletions:
		return openai.NewCompletions(openai.Config{Info: mi, BaseURL: mi.BaseURL, APIKey: c.APIKey, Headers: c.Headers,
			Compat: c.Compat, HTTP: r.client(c), Logger: o.Logger, Retry: o.Retry, KeySource: c.keySource()})
	case APIOpenAIResponses:
		return openai.NewResponses(openai.Config{Info: mi, BaseURL: mi.BaseURL, APIKey: c.APIKey, Headers: c.Headers,
			Compat: c.Compat, HTTP: r.client(c), Logger: o.Logger, Retry: o.Retry, KeySource: c.keySource()})
	case APIAnthropic:
		return anthropic.New(anthropic.Config{Info: mi, BaseURL: mi.BaseURL, APIKey: c.APIKey, Headers: c.Headers,
			HTTP: r.client(c), Logger: o.Logger, Retry: o.Retry, KeySource: c.keySource()})
	default: // APIFaux; NewRegistry rejected every other name.
		d := o.FauxDelay
		if d == 0 {
			d = 30 * time.Millisecond
		}
		echo := faux.Echo().WithDelay(max(d, 0))
		if len(c.Script) == 0 {
			return faux.New(mi, echo)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		key := c.Name + "/" + mi.ID
		if m, ok := r.fauxs[key]; ok {
			return m
		}
		if r.fauxs == nil {
			r.fauxs = map[string]*faux.Model{}
		}
		m := faux.New(mi, append(append([]faux.Turn(nil), c.Script...), echo)...)
		r.fauxs[key] = m
		return m
	}
}

// client is the HTTP client of provider c: the shared one (its transport
// and connection pool) under c's timeouts.
func (r *Registry) client(c Config) *http.Client {
	return transport.WithTimeouts(r.opts.HTTPClient, c.Name, c.Timeouts)
}

// List returns every configured model in configuration order.
func (r *Registry) List() []ModelStatus {
	var out []ModelStatus
	for _, name := range r.order {
		c := r.providers[name]
		for _, m := range c.Models {
			out = append(out, ModelStatus{Info: info(c, m), HasCredentials: !c.needsKey() || !c.APIKey.IsZero()})
		}
	}
	return out
}
