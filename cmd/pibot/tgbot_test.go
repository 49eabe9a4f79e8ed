package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
)

// modelRequest is one request the scripted model server received, read
// from the OpenAI chat completions body.
type modelRequest struct {
	// System is the system prompt.
	System string
	// Last is the last message: its role and text (a tool result's
	// content).
	LastRole, Last string
	Body           []byte
}

// scriptedModel is an OpenAI chat completions server whose answer to each
// request is chosen by answer (an SSE body: ccText, ccCalls), so that the
// answers do not depend on how many requests a restart cut short.
type scriptedModel struct {
	*httptest.Server
	answer func(r modelRequest) string

	mu   sync.Mutex
	reqs []modelRequest
}

func newScriptedModel(t *testing.T, answer func(r modelRequest) string) *scriptedModel {
	m := &scriptedModel{answer: answer}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := parseModelRequest(body)
		m.mu.Lock()
		m.reqs = append(m.reqs, req)
		m.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, m.answer(req))
	}))
	t.Cleanup(m.Close)
	return m
}

// requests returns the requests so far.
func (m *scriptedModel) requests() []modelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// parseModelRequest reads the system prompt and the last message of a
// chat completions request.
func parseModelRequest(body []byte) modelRequest {
	var wire struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &wire)
	text := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var parts []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &parts)
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	r := modelRequest{Body: body}
	for _, m := range wire.Messages {
		if m.Role == "system" || m.Role == "developer" {
			r.System = text(m.Content)
			continue
		}
		r.LastRole, r.Last = m.Role, text(m.Content)
	}
	return r
}

// ccChunk is one chat completions stream event.
func ccChunk(delta map[string]any, finish any) string {
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	return "data: " + string(b) + "\n\n"
}

// ccText is an answer of text.
func ccText(text string) string {
	return ccChunk(map[string]any{"role": "assistant", "content": text}, nil) + ccChunk(map[string]any{}, "stop") + "data: [DONE]\n\n"
}

// ccCall is a tool call of a ccCalls answer.
type ccCall struct{ ID, Name, Args string }

// ccCalls is an answer of tool calls.
func ccCalls(calls ...ccCall) string {
	var tcs []any
	for i, c := range calls {
		tcs = append(tcs, map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": c.Args}})
	}
	return ccChunk(map[string]any{"role": "assistant", "tool_calls": tcs}, nil) + ccChunk(map[string]any{}, "tool_calls") + "data: [DONE]\n\n"
}

// tgBot is `pibot serve` in dir against a fake Telegram (polling) and a
// scripted model server, restartable with another config.
type tgBot struct {
	t     *testing.T
	dir   string
	tg    *telegramtest.Server
	model *scriptedModel
	s     *server
}

const tgBotToken = "5151:extension-test-token"

func newTgBot(t *testing.T, answer func(r modelRequest) string) *tgBot {
	t.Helper()
	b := &tgBot{t: t, dir: t.TempDir(), tg: telegramtest.New(tgBotToken), model: newScriptedModel(t, answer)}
	t.Cleanup(b.tg.Close)
	return b
}

// config is the part of the config every tgBot has: the model, Telegram
// and no web chat; extra is appended (it may add agent: keys under
// "agentExtra").
func (b *tgBot) config(agentExtra, extra string) string {
	return `data_dir: ./data
providers:
  m:
    api: openai-completions
    base_url: ` + b.model.URL + `/v1
    models: [{id: m}]
agent:
  model: m/m
  workspace: ./ws
  sandbox: "off"
  retry: {enabled: false}
` + agentExtra + `adapters:
  web: {enabled: false}
  telegram:
    token: "` + tgBotToken + `"
    api_url: ` + b.tg.URL + `
` + extra
}

// start writes cfg and starts pibot serve with it.
func (b *tgBot) start(cfg string) {
	b.t.Helper()
	writeFile(b.t, b.dir, "pibot.yaml", cfg)
	polls := len(b.tg.Calls("deleteWebhook"))
	b.s = startServe(b.t, b.dir, "-c", "pibot.yaml", "--listen", "127.0.0.1:0")
	b.waitFor("the bot polling", func() bool { return len(b.tg.Calls("deleteWebhook")) > polls })
}

// restart stops pibot and starts it with cfg.
func (b *tgBot) restart(cfg string) {
	b.t.Helper()
	if code := b.s.stop(b.t); code != 0 {
		b.t.Fatalf("pibot exited %d:\n%s", code, b.s.stderr)
	}
	b.start(cfg)
}

// say sends text to the bot from user in their DM.
func (b *tgBot) say(user models.User, text string) { b.tg.AddText(user.ID, user, text) }

// waitMessage waits for a bot message containing sub in user's DM posted
// after the first skip ones, and returns it.
func (b *tgBot) waitMessage(user models.User, skip int, sub string) telegramtest.Message {
	b.t.Helper()
	var found telegramtest.Message
	b.waitFor("a message with "+sub, func() bool {
		msgs := b.tg.Messages(user.ID)
		for _, m := range msgs[min(skip, len(msgs)):] {
			if strings.Contains(m.Text, sub) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// ask sends text and returns the first new bot message containing sub.
func (b *tgBot) ask(user models.User, text, sub string) telegramtest.Message {
	b.t.Helper()
	n := len(b.tg.Messages(user.ID))
	b.say(user, text)
	return b.waitMessage(user, n, sub)
}

func (b *tgBot) waitFor(what string, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			var texts []string
			for _, id := range []int64{1001, 2002} {
				for _, m := range b.tg.Messages(id) {
					texts = append(texts, m.Text)
				}
			}
			stderr := ""
			if b.s != nil {
				stderr = b.s.stderr.String()
			}
			b.t.Fatalf("timed out waiting for %s; bot messages %q\nstderr:\n%s", what, texts, stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// file returns the content of a file of the bot's directory ("" if none).
func (b *tgBot) file(name string) string {
	data, _ := os.ReadFile(b.dir + "/" + name)
	return string(data)
}

// lastCommands are the command names of the bot's latest setMyCommands.
func (b *tgBot) lastCommands() []string {
	var out []string
	for _, c := range b.tg.Commands() {
		out = append(out, c.Command)
	}
	return out
}
