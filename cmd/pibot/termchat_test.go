//go:build linux

package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/pibot/pibot/adapters/term/termtest"
)

// sseWriter writes one chat completions answer as a stream of events, each
// flushed at once, so the test can hold the model between two of them.
type sseWriter struct {
	w http.ResponseWriter
}

// text streams a piece of the answer's text.
func (s sseWriter) text(text string) {
	_, _ = io.WriteString(s.w, ccChunk(map[string]any{"role": "assistant", "content": text}, nil))
	s.w.(http.Flusher).Flush()
}

// calls ends the answer with tool calls.
func (s sseWriter) calls(calls ...ccCall) {
	_, _ = io.WriteString(s.w, ccCalls(calls...))
}

// stop ends the answer.
func (s sseWriter) stop() {
	_, _ = io.WriteString(s.w, ccChunk(map[string]any{}, "stop")+"data: [DONE]\n\n")
}

// newStreamingModel is an OpenAI chat completions server whose answers
// answer streams piece by piece; it returns the server's URL.
func newStreamingModel(t *testing.T, answer func(r *http.Request, req modelRequest, w sseWriter)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		answer(r, parseModelRequest(body), sseWriter{w})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// termChatConfig is a terminal chat on the model at url that asks before
// every bash call.
func termChatConfig(t *testing.T, dir, url string) string {
	t.Helper()
	mkdirs(t, dir+"/ws")
	return writeFile(t, dir, "c.yaml", `data_dir: ./data
providers:
  m:
    api: openai-completions
    base_url: `+url+`/v1
    models: [{id: m}]
agent:
  model: m/m
  workspace: ./ws
  sandbox: "off"
  retry: {enabled: false}
  approvals: {dm: {bash: ask}}
adapters:
  web: {enabled: false}
`)
}

// screenFrom plays what the terminal showed on an 80×24 screen and
// returns the screen's text from the first line that starts with first,
// with tool durations written "Ns".
func screenFrom(t *testing.T, shown, first string) string {
	t.Helper()
	scr := termtest.NewScreen(80, 24)
	_, _ = scr.Write([]byte(shown))
	text := scr.Text()
	i := strings.Index(text, "\n"+first)
	if i < 0 {
		t.Fatalf("the screen has no line %q:\n%s", first, text)
	}
	return regexp.MustCompile(`· \d+\.\ds`).ReplaceAllString(text[i+1:], "· Ns")
}

// TestTermChatApprovalOnPty replays issue 32's terminal approval through
// the real binary on a pseudo-terminal, with a model that streams: the
// reply asks to run bash, the card shows, the user presses a number. The
// final screen shows each part of the reply once, the card replaced by
// its outcome, no "waiting for approval" left behind and no "↻ edited"
// anywhere in what was printed.
func TestTermChatApprovalOnPty(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, result, want string
	}{
		{"allowed", "1", "Result: hi.",
			"› run it\nLet me check.\n✅ bash allowed once by you.\n› 1\n✓ bash · echo hi · Ns\n\nResult: hi."},
		{"denied", "3", "Result: not run.",
			"› run it\nLet me check.\n❌ bash denied by you.\n› 3\n✗ bash · echo hi · Ns — The user denied this tool call.\n\nResult: not run."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			url := newStreamingModel(t, func(r *http.Request, req modelRequest, w sseWriter) {
				if req.LastRole == "tool" {
					w.text("Result: ")
					select {
					case <-release:
					case <-r.Context().Done():
						return
					}
					if strings.Contains(req.Last, "denied") {
						w.text("not run.")
					} else {
						w.text(strings.TrimSpace(req.Last) + ".")
					}
					w.stop()
					return
				}
				w.text("Let ")
				w.text("me ")
				w.text("check.")
				w.calls(ccCall{"c1", "bash", `{"command":"echo hi"}`})
			})
			dir := t.TempDir()
			p := startPtyChat(t, dir, termChatConfig(t, dir, url))
			p.waitShown(t, "› ", 1)
			p.typeKeys(t, "run it\r")
			p.waitShown(t, "waiting for approval of bash", 1)
			p.typeKeys(t, tt.key+"\r")
			p.waitShown(t, "Result:", 1)
			close(release)
			p.waitShown(t, tt.result, 1)
			p.typeKeys(t, "\x04")
			shown := p.wait(t)
			if got := screenFrom(t, shown, "› run it"); got != tt.want {
				t.Errorf("screen:\n%s\nwant:\n%s", got, tt.want)
			}
			if strings.Contains(shown, "↻") {
				t.Errorf("printed an edit note:\n%q", shown)
			}
		})
	}
}

// TestTermChatCommandMidStreamOnPty: /status sent while a reply streams
// is answered above the reply, which goes on streaming below it; no
// partial copy of the reply is left behind (issue 32).
func TestTermChatCommandMidStreamOnPty(t *testing.T) {
	release := make(chan struct{})
	url := newStreamingModel(t, func(r *http.Request, req modelRequest, w sseWriter) {
		w.text("First part of the answer, ")
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.text("second part.")
		w.stop()
	})
	dir := t.TempDir()
	p := startPtyChat(t, dir, termChatConfig(t, dir, url))
	p.waitShown(t, "› ", 1)
	p.typeKeys(t, "tell me\r")
	p.waitShown(t, "First part of the answer,", 1)
	p.typeKeys(t, "/status\r")
	p.waitShown(t, "queue mode:", 1)
	close(release)
	p.waitShown(t, "second part.", 1)
	p.typeKeys(t, "\x04")
	shown := p.wait(t)
	got := screenFrom(t, shown, "› tell me")
	lines := strings.Split(got, "\n")
	if len(lines) < 4 || lines[0] != "› tell me" || lines[1] != "› /status" || !strings.HasPrefix(lines[2], "Session ") ||
		lines[len(lines)-1] != "First part of the answer, second part." || strings.Count(got, "First part") != 1 {
		t.Errorf("screen:\n%s\nwant the line, the command, its answer, then the whole reply once", got)
	}
	if !strings.Contains(got, "queue mode: ") || strings.Index(got, "queue mode: ") > strings.Index(got, "First part") {
		t.Errorf("the answer to /status is not above the reply:\n%s", got)
	}
}
