package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/internal/tinyfs"
)

// TestFullDiskReadyzAndRecovery runs the real binary with its data
// directory on a small tmpfs that fills up: /readyz answers 503 with the
// reason while messages are refused, and 200 again once space is freed,
// after which messages are answered, all without a restart.
func TestFullDiskReadyzAndRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary")
	}
	fs := tinyfs.Mount(t, 8<<20)
	bin := crashBuild(t)
	dir := t.TempDir()
	data := filepath.Join(fs, "data")
	addr := crashFreeAddr(t)
	cfg := filepath.Join(dir, "pibot.yaml")
	yaml := fmt.Sprintf("data_dir: %s\nhttp:\n  listen: %s\nproviders:\n  f:\n    api: faux\n    models:\n      - id: m\nagent:\n  model: f/m\n", data, addr)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := crashStart(t, bin, cfg, dir, addr)
	send := func(id, text string) (int, string) {
		body, _ := json.Marshal(map[string]string{"conv": crashConv, "id": id, "text": text})
		resp, err := http.Post(p.base+"/api/send", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	readyz := func() (int, string) {
		resp, err := http.Get(p.base + "/readyz")
		if err != nil {
			t.Fatalf("readyz: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	chat := p.watch(t.Context())
	if code, body := send("m0", "hello"); code != http.StatusOK {
		t.Fatalf("send: %d %s", code, body)
	}
	chat.waitBot(t, "answering hello", 10*time.Second, func(s string) bool { return strings.Contains(s, "You said: hello") })

	free := tinyfs.Fill(t, fs)
	refused := ""
	for i := range 50 {
		text := fmt.Sprintf("filler %d", i)
		if code, _ := send(fmt.Sprintf("f%d", i), text); code != http.StatusOK {
			refused = text
			break
		}
	}
	if refused == "" {
		t.Fatal("50 messages were taken on a full disk")
	}
	code, body := readyz()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left") {
		t.Fatalf("/readyz on a full disk = %d %q, want 503 naming the ENOSPC", code, body)
	}
	free()
	crashWait(t, "/readyz 200 after space returned", 10*time.Second, func() bool { code, _ := readyz(); return code == http.StatusOK })
	if code, body := send("again", refused); code != http.StatusOK {
		t.Fatalf("send after space returned: %d %s", code, body)
	}
	chat.waitBot(t, "answering after the disk recovered", 10*time.Second, func(s string) bool { return strings.Contains(s, "You said: "+refused) })
	p.stop()
}
