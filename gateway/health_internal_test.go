package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
)

// A failed write is recorded (storageFailed) before the messages of the
// failed run are stranded, often on another path (the session's write,
// then the run's record). The disk probe can run in between: the disk may
// be writable again by then. Whatever the order, the stranded message is
// routed again by a probe, and Health reports the gateway degraded until
// it is (a stranded message left while Health says all is well waits,
// unanswered, for a restart).
func TestStrandedMessageIsReroutedWhateverTheProbeOrder(t *testing.T) {
	full := fmt.Errorf("gateway: append: %w", fmt.Errorf("%w: %w", cluster.ErrWrite, syscall.ENOSPC))
	tests := []struct {
		name  string
		steps []string
	}{
		{"probe after the strand", []string{"failed", "strand"}},
		{"probe between the failure and the strand", []string{"failed", "probe", "strand"}},
		// keepInInbox: the run's error is not itself a storage error (the
		// session was closed), but a failed write fenced the session
		// earlier and a probe has cleared that failure since.
		{"strand after the failure was cleared", []string{"strand"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			inbox, err := cluster.OpenInbox(filepath.Join(dir, "inbox.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { inbox.Close() })
			index, err := cluster.OpenIndex(filepath.Join(dir, "index.jsonl"), cluster.IndexOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { index.Close() })
			const key = "test::c1"
			id, durable, err := inbox.Enqueue(t.Context(), key, []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if err := durable(); err != nil {
				t.Fatal(err)
			}
			p := &pending{item: inboxItem{In: chat.Inbound{Kind: chat.KindMessage}}, inbox: inboxRef{key: key, id: id}}
			var rerouted []string
			h := &health{log: slog.New(slog.NewTextHandler(io.Discard, nil)), inbox: inbox, index: index, dataDir: dir,
				reroute: func(p *pending) { rerouted = append(rerouted, p.inbox.id) }}

			for _, step := range tt.steps {
				switch step {
				case "failed":
					h.storageFailed(nil, full)
				case "probe":
					h.probe(t.Context()) // the disk works again
				case "strand":
					h.strand(full, []*pending{p})
				}
			}
			if err := h.check(); err == nil {
				t.Fatal("Health() = nil with a message stranded: nothing routes it again until a restart")
			}
			if len(rerouted) != 0 {
				t.Fatalf("rerouted %v before a probe found the disk writable", rerouted)
			}
			h.probe(t.Context())
			if err := h.check(); err != nil {
				t.Fatalf("Health() = %v after a probe found the disk writable", err)
			}
			if !slices.Equal(rerouted, []string{id}) {
				t.Fatalf("rerouted %v, want the stranded message %s once", rerouted, id)
			}
		})
	}
}

// TestProbesShareADataDirectory: replicas on one data directory probe it
// at the same time (issue #29). With one probe name for all, a probe
// removed the file another was writing and that one failed, keeping its
// replica degraded.
func TestProbesShareADataDirectory(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			for i := range 25 {
				if err := probeWrite(dir); err != nil {
					t.Errorf("replica %d, probe %d: %v", r, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("probes left files: %v", ents)
	}
}
