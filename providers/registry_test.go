package providers

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/anthropic"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/providers/openai"
	"github.com/pibot/pibot/providers/providertest"
)

func testConfigs() []Config {
	return []Config{
		{Name: "ollama", API: APIOpenAICompletions, BaseURL: "http://localhost:11434/v1", Models: []llm.ModelInfo{{ID: "qwen3:8b", Reasoning: true}}},
		{Name: "openrouter", API: APIOpenAICompletions, BaseURL: "https://openrouter.ai/api/v1", Models: []llm.ModelInfo{{ID: "anthropic/claude-sonnet-4.5"}}},
		{Name: "anthropic", API: APIAnthropic, APIKey: secret.New("sk-ant-x"), Models: []llm.ModelInfo{{ID: "claude-haiku-4-5", Input: []string{"text", "image"}}}},
		{Name: "mixed", API: APIOpenAIResponses, APIKey: secret.New("k"), Models: []llm.ModelInfo{{ID: "gpt-5"}, {ID: "legacy", API: APIOpenAICompletions}}},
		{Name: "faux", API: APIFaux},
	}
}

func TestRegistryModel(t *testing.T) {
	reg, err := NewRegistry(testConfigs(), Options{FauxDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref     string
		wantT   any
		errSub  string
		noCreds bool
	}{
		{ref: "ollama/qwen3:8b", wantT: &openai.Completions{}},
		{ref: "anthropic/claude-haiku-4-5", wantT: &anthropic.Model{}},
		{ref: "mixed/gpt-5", wantT: &openai.Responses{}},
		{ref: "mixed/legacy", wantT: &openai.Completions{}},
		{ref: "faux/echo", wantT: &faux.Model{}},
		{ref: "faux/anything", wantT: &faux.Model{}},
		{ref: "openrouter/anthropic/claude-sonnet-4.5", errSub: "no credentials", noCreds: true},
		{ref: "nope/x", errSub: `provider "nope" is not configured`},
		{ref: "anthropic/claude-9", errSub: `model "claude-9" is not configured for provider "anthropic" (have: claude-haiku-4-5)`},
		{ref: "noslash", errSub: "not \"provider/model\""},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			m, err := reg.Model(tt.ref)
			if tt.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errSub) || errors.Is(err, llm.ErrNoCredentials) != tt.noCreds {
					t.Fatalf("err = %v, want containing %q", err, tt.errSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := typeName(m), typeName(tt.wantT); got != want {
				t.Errorf("type = %s, want %s", got, want)
			}
			if !strings.HasPrefix(tt.ref, m.Info().Provider+"/") || m.Info().ContextWindow == 0 {
				t.Errorf("info = %+v", m.Info())
			}
		})
	}
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }

func TestNewRegistryErrors(t *testing.T) {
	tests := []struct {
		name string
		cfgs []Config
		want string
	}{
		{"no name", []Config{{API: APIFaux}}, "no name"},
		{"dup", []Config{{Name: "a", API: APIFaux}, {Name: "a", API: APIFaux}}, "configured twice"},
		{"bad api", []Config{{Name: "a", API: "grpc"}}, `unknown api "grpc"`},
		{"dup model", []Config{{Name: "a", API: APIFaux, Models: []llm.ModelInfo{{ID: "x"}, {ID: "x"}}}}, "listed twice"},
		{"no api", []Config{{Name: "a", Models: []llm.ModelInfo{{ID: "x"}}}}, "unknown api"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewRegistry(tt.cfgs, Options{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestListAndDefaults(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"}
	defs := Defaults(func(k string) string { return env[k] })
	if len(defs) != 2 || defs[0].Name != "openai" || defs[1].Name != "anthropic" {
		t.Fatalf("defaults = %+v", defs)
	}
	if len(Defaults(func(string) string { return "" })) != 0 {
		t.Error("defaults without env")
	}
	reg, err := NewRegistry(append(defs, testConfigs()[:2]...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]bool{}
	for _, s := range reg.List() {
		creds[s.Info.Ref()] = s.HasCredentials
		if s.Info.API == "" || s.Info.Name == "" || s.Info.MaxTokens == 0 {
			t.Errorf("incomplete info %+v", s.Info)
		}
	}
	for ref, want := range map[string]bool{"openai/gpt-4.1": true, "anthropic/claude-sonnet-4-5": true, "ollama/qwen3:8b": true, "openrouter/anthropic/claude-sonnet-4.5": false} {
		if got, ok := creds[ref]; !ok || got != want {
			t.Errorf("%s creds = %v (listed %v), want %v", ref, got, ok, want)
		}
	}
	for _, ref := range []string{"openai/o4-mini", "anthropic/claude-opus-4-1", "openai/gpt-4o-mini"} {
		if _, err := reg.Model(ref); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}
}

func TestRegistryStreamsThroughHTTPClient(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "openai/testdata/cc_text.sse"))
	reg, err := NewRegistry([]Config{{Name: "local", API: APIOpenAICompletions, BaseURL: srv.URL + "/v1", Models: []llm.ModelInfo{{ID: "m"}}}},
		Options{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := reg.Model("local/m")
	if err != nil {
		t.Fatal(err)
	}
	_, final := providertest.Collect(t, m.Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.UserText("hi", 1)}}))
	if final.Text() != "Hello! How can I help?" || final.Provider != "local" {
		t.Errorf("final = %q %q", final.Text(), final.Provider)
	}
	if h := srv.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("keyless provider sent Authorization %q", h)
	}
}

func TestScriptedFauxAdvancesAcrossCalls(t *testing.T) {
	reg, err := NewRegistry([]Config{{Name: "demo", API: APIFaux, Models: []llm.ModelInfo{{ID: "m"}},
		Script: []faux.Turn{faux.Text("first"), faux.ToolCalls(faux.Call("c1", "ls", `{}`))}}}, Options{FauxDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		m, err := reg.Model("demo/m")
		if err != nil {
			t.Fatal(err)
		}
		var final *llm.Message
		for ev := range m.Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.UserText("hello", 1)}}) {
			if ev.Type == llm.EventDone || ev.Type == llm.EventError {
				final = ev.Message
			}
		}
		got = append(got, string(final.StopReason)+":"+final.Text())
	}
	if got[0] != "stop:first" || got[1] != "toolUse:" || !strings.Contains(got[2], "hello") {
		t.Fatalf("scripted answers = %q (want the script, then an echo)", got)
	}
}

// Root is where each API's client sends its calls: doctor lists the models
// there, so it must resolve base_url as the clients do.
func TestConfigRoot(t *testing.T) {
	tests := []struct{ api, base, want string }{
		{APIOpenAIResponses, "", "https://api.openai.com/v1"},
		{APIOpenAICompletions, "http://127.0.0.1:11434/v1/", "http://127.0.0.1:11434/v1"},
		{APIAnthropic, "", "https://api.anthropic.com"},
		{APIAnthropic, "https://proxy.example/anthropic/v1/", "https://proxy.example/anthropic"},
		{APIFaux, "", ""},
	}
	for _, tt := range tests {
		if got := (Config{API: tt.api, BaseURL: tt.base}).Root(); got != tt.want {
			t.Errorf("%s %q: Root() = %q, want %q", tt.api, tt.base, got, tt.want)
		}
	}
}
