package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pibot/pibot/internal/tinyfs"
	"github.com/pibot/pibot/tools/jail"
)

// quotaSet returns a Set on workspace ws with quota q and, when jailed,
// bash in a jail with testLimits.
func quotaSet(t *testing.T, ws string, q Quota, jailed bool) *Set {
	t.Helper()
	opts := Options{Workspace: ws, Quota: q, TempDir: t.TempDir(), NonOwnersWorkspaceOnly: true}
	if jailed {
		j, err := jail.New(jail.Config{Limits: testLimits})
		if err != nil {
			t.Fatal(err)
		}
		opts.Jail = j
	}
	s, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s.Bind(func() bool { return false }, nil) // a non-owner's calls
}

// TestWriteLimits replays issue 30.10 through write and edit: a file over
// agent.limits.file_size is refused, writes stop at the workspace's
// quota with a message naming agent.limits.workspace_size, and an edit
// that shrinks a file still works when the workspace is full.
func TestWriteLimits(t *testing.T) {
	ws := t.TempDir()
	const chunk = 8 << 10
	base := diskUsage(ws)
	limit := base + 5*chunk + chunk/2
	s := quotaSet(t, ws, Quota{FileSize: 2 * chunk, WorkspaceSize: limit}, false)
	big := strings.Repeat("x", 2*chunk+1)
	if got, isErr, _ := call(t, s, "write", `{"path":"big","content":"`+big+`"}`); !isErr || !strings.Contains(got, "over the limit of 16 KiB per file (agent.limits.file_size)") {
		t.Errorf("write over file_size: %.200q", got)
	}
	content := strings.Repeat("y", chunk)
	written := 0
	for i := range 10 {
		got, isErr, _ := call(t, s, "write", `{"path":"f`+itoa(i)+`","content":"`+content+`"}`)
		if isErr {
			if !strings.Contains(got, "over its quota of") || !strings.Contains(got, "(agent.limits.workspace_size)") {
				t.Errorf("refusal: %q", got)
			}
			break
		}
		written++
	}
	if written != 5 {
		t.Errorf("%d writes of 8 KiB admitted under a quota with room for 5", written)
	}
	// Rewriting a file with the same size, and shrinking one, still work.
	if got, isErr, _ := call(t, s, "write", `{"path":"f0","content":"`+content+`"}`); isErr {
		t.Errorf("same-size rewrite: %q", got)
	}
	if got, isErr, _ := call(t, s, "edit", `{"path":"f1","edits":[{"oldText":"`+content+`","newText":"short"}]}`); isErr {
		t.Errorf("shrinking edit: %q", got)
	}
	if got, isErr, _ := call(t, s, "edit", `{"path":"f0","edits":[{"oldText":"`+content+`","newText":"`+content+content+`"}]}`); !isErr || !strings.Contains(got, "workspace_size") {
		t.Errorf("growing edit over the quota: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f0")); len(b) != chunk {
		t.Errorf("f0 changed by a refused edit: %d bytes", len(b))
	}
}

// TestDiskReserve replays issue 30.10 on a real, small file system
// shared by the workspace and "pibot's data": write refuses to take the
// reserve; a bash call cannot write a file larger than the room above
// it, nor many files past it (stopped); once free space is under the
// reserve, bash runs with file writes blocked but can delete files, and
// the data directory keeps its reserve throughout.
func TestDiskReserve(t *testing.T) {
	fs := tinyfs.Mount(t, 32<<20)
	ws, data := filepath.Join(fs, "ws"), filepath.Join(fs, "data")
	for _, d := range []string{ws, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	const reserve = 16 << 20
	s := quotaSet(t, ws, Quota{DiskReserve: reserve, Guard: []string{data}}, true)
	free := func() int64 { f, _ := freeSpace(data); return f }
	if got, isErr, _ := call(t, s, "write", `{"path":"a","content":"`+strings.Repeat("a", 4<<20)+`"}`); isErr {
		t.Fatalf("write of 4 MiB: %q", got)
	}
	got, isErr, _ := call(t, s, "write", `{"path":"b","content":"`+strings.Repeat("b", 14<<20)+`"}`)
	if !isErr || !strings.Contains(got, "(agent.limits.disk_reserve)") {
		t.Errorf("write into the reserve: %.300q", got)
	}
	// One large file: cut at the room above the reserve.
	got, isErr, _ = call(t, s, "bash", `{"command":"head -c 30000000 /dev/zero > big"}`)
	if !isErr || !strings.Contains(got, "of free space left above the 16 MiB kept free for pibot's data (agent.limits.disk_reserve)") {
		t.Errorf("bash writing one large file: %q", trim(got))
	}
	if f := free(); f < reserve-(1<<20) {
		t.Errorf("free space %d, under the reserve", f)
	}
	if err := os.Remove(filepath.Join(ws, "big")); err != nil {
		t.Fatal(err)
	}
	// Many files, each small and allocated at once (fallocate), then
	// written in parallel: the call is stopped once the reserve is
	// reached (free space is checked every 10 ms).
	got, isErr, _ = call(t, s, "bash", `{"command":"for i in $(seq 100); do fallocate -l 1M f$i && echo -n . ; done; for i in $(seq 100); do head -c 1000000 /dev/zero > g$i & done; wait; echo done"}`)
	if !isErr || !strings.Contains(got, "fell under the 16 MiB kept free for pibot's data (agent.limits.disk_reserve): the command was stopped") {
		t.Errorf("bash writing many files: %q", trim(got))
	}
	t.Logf("fallocate of 1 MiB files stopped with %d bytes free (reserve %d)", free(), reserve)
	if f := free(); f < reserve/2 {
		t.Errorf("free space %d after the stopped call: the reserve was overrun by more than half", f)
	}
	// Under the reserve (fill it from outside the tools): writes are
	// blocked, deleting works, pibot's data is still writable.
	filler := filepath.Join(data, "filler")
	if err := os.WriteFile(filler, make([]byte, max(free()-reserve+(1<<20), 0)), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _, _ = call(t, s, "bash", `{"command":"echo x > new; ls new; rm -f f*; echo removed"}`)
	if !strings.Contains(got, "removed") || !strings.Contains(got, "This command ran with file writes blocked") {
		t.Errorf("bash under the reserve: %q", trim(got))
	}
	if st, err := os.Stat(filepath.Join(ws, "new")); err == nil && st.Size() > 0 {
		t.Errorf("a blocked call wrote a file of %d bytes", st.Size())
	}
	if _, err := os.Stat(filepath.Join(ws, "f0")); err == nil {
		t.Error("the blocked call could not delete files")
	}
	if err := os.WriteFile(filepath.Join(data, "session.jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Errorf("pibot's data is not writable: %v", err)
	}
}

// TestBashOverWorkspaceQuota: a bash call may take the workspace past
// its quota (the quota is measured between calls); the next one runs with
// file writes blocked and says so, deleting files still works, and once
// under the quota writes are back.
func TestBashOverWorkspaceQuota(t *testing.T) {
	ws := t.TempDir()
	s := quotaSet(t, ws, Quota{WorkspaceSize: diskUsage(ws) + 64<<10}, true)
	if got, isErr, _ := call(t, s, "bash", `{"command":"head -c 300000 /dev/zero > big; echo ok"}`); isErr || got != "ok\n" {
		t.Fatalf("first call: %q", got)
	}
	got, isErr, _ := call(t, s, "bash", `{"command":"echo x > small; rm big; echo removed"}`)
	if !strings.Contains(got, "removed") || !strings.Contains(got, "at its quota of") || !strings.Contains(got, "ran with file writes blocked") {
		t.Errorf("over the quota: (%v) %q", isErr, trim(got))
	}
	if st, err := os.Stat(filepath.Join(ws, "small")); err == nil && st.Size() > 0 {
		t.Error("a blocked call wrote a file")
	}
	if got, isErr, _ := call(t, s, "bash", `{"command":"echo x > small; cat small"}`); isErr || got != "x\n" {
		t.Errorf("back under the quota: (%v) %q", isErr, trim(got))
	}
	if got, _, _ := call(t, s, "write", `{"path":"w","content":"`+strings.Repeat("w", 100<<10)+`"}`); !strings.Contains(got, "workspace_size") {
		t.Errorf("write over the quota: %.200q", got)
	}
}

// BenchmarkDiskUsage measures the walk that measures the workspace for
// agent.limits.workspace_size (before the first write or bash call after
// a bash call): 10,000 files in 100 directories.
func BenchmarkDiskUsage(b *testing.B) {
	ws := b.TempDir()
	for d := range 100 {
		dir := filepath.Join(ws, "d"+itoa(d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(dir, "f"+itoa(f)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if diskUsage(ws) == 0 {
			b.Fatal("nothing measured")
		}
	}
}

// BenchmarkRead measures a read of a small file, confined (os.Root) and
// unconfined (openat2 and the sandbox-less checks), including the checks
// of the opened file.
func BenchmarkRead(b *testing.B) {
	for _, only := range []bool{true, false} {
		b.Run(map[bool]string{true: "confined", false: "unconfined"}[only], func(b *testing.B) {
			ws := b.TempDir()
			if err := os.MkdirAll(filepath.Join(ws, "a/b/c"), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "a/b/c/f.txt"), []byte("hello\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			s, err := New(b.Context(), Options{Workspace: ws, WorkspaceOnly: only, TempDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			tool := s.Get("read")
			args := json.RawMessage(`{"path":"a/b/c/f.txt"}`)
			for b.Loop() {
				if _, err := tool.Execute(b.Context(), "c", args, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
