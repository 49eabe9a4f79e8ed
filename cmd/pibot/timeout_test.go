package main

import (
	"os"
	"strings"
	"testing"

	"github.com/pibot/pibot/providers/providertest"
)

// TestChatProviderStallShowsHint replays a provider that streams the start
// of an answer and then stops sending, through the real binary: `pibot
// chat -p` must end (not hang) and tell the user which timeout fired and
// what to raise.
func TestChatProviderStallShowsHint(t *testing.T) {
	b, err := os.ReadFile("../../providers/openai/testdata/cc_text.sse")
	if err != nil {
		t.Fatal(err)
	}
	head := strings.Join(strings.SplitAfter(string(b), "\n\n")[:3], "")
	srv := providertest.NewServer(t, providertest.Response{Body: head, Stall: true})
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./data\nproviders:\n  slow:\n    api: openai-completions\n    base_url: "+srv.URL+"/v1\n"+
		"    models: [{id: m}]\n    timeouts: {idle: 300ms}\nagent:\n  model: slow/m\n  retry: {enabled: false}\n")
	r := pibot(t, dir, "", nil, "chat", "-c", cfg, "-p", "hello")
	out := r.stdout + r.stderr
	if !strings.Contains(out, "stopped sending for 300ms") || !strings.Contains(out, "raise providers.slow.timeouts.idle if this model thinks for long") {
		t.Fatalf("exit %d, output does not give the idle timeout and its hint:\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("provider got %d requests, want 1", n)
	}
}
