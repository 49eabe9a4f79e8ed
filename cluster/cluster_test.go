package cluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestLockDirRefusesSecondOwner(t *testing.T) {
	dir := t.TempDir()
	l, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A second process must be refused: flock is per open file description,
	// so test it from a child process.
	if os.Getenv("PIBOT_LOCK_CHILD") != "" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=TestLockDirChild")
	cmd.Env = append(os.Environ(), "PIBOT_LOCK_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("relock after unlock: %v", err)
	}
	l2.Unlock()
}

func TestLockDirChild(t *testing.T) {
	dir := os.Getenv("PIBOT_LOCK_CHILD")
	if dir == "" {
		t.Skip("helper for TestLockDirRefusesSecondOwner")
	}
	_, err := LockDir(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second LockDir = %v, want ErrLocked", err)
	}
}

func TestLockerFencesGrowAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	l1, err := NewLocker(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := l1.Acquire(t.Context(), "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l1.Acquire(t.Context(), "s1", 0); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second Acquire = %v, want ErrLeaseHeld", err)
	}
	if p, ok := a.(interface{ Permanent() bool }); !ok || !p.Permanent() {
		t.Fatal("a local lease does not say it is permanent (never lost)")
	}
	a.Release(t.Context())
	select {
	case <-a.Done():
	default:
		t.Fatal("Done not closed after Release")
	}
	l2, err := NewLocker(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := l2.Acquire(t.Context(), "s1", 0)
	if b.Fence() <= a.Fence() {
		t.Fatalf("fence after restart %d <= %d", b.Fence(), a.Fence())
	}
	c, _ := l2.Acquire(t.Context(), "s2", 100)
	if c.Fence() != 101 {
		t.Fatalf("fence with minFence 100 = %d, want 101", c.Fence())
	}
}

func TestDedupe(t *testing.T) {
	d := NewDedupe(time.Minute, 2)
	now := time.Unix(1000, 0)
	d.now = func() time.Time { return now }
	for _, tt := range []struct {
		key  string
		want bool
	}{{"a", false}, {"a", true}, {"b", false}, {"c", false}, {"a", false}} {
		got, _ := d.Seen(t.Context(), tt.key)
		if got != tt.want {
			t.Fatalf("Seen(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
	now = now.Add(2 * time.Minute)
	if got, _ := d.Seen(t.Context(), "c"); got {
		t.Fatal("key survived its TTL")
	}
	d.Forget(t.Context(), "c")
	if got, _ := d.Seen(t.Context(), "c"); got {
		t.Fatal("Forget did not forget")
	}
}

func TestBudget(t *testing.T) {
	b := NewBudget(1, 2)
	now := time.Unix(0, 0)
	b.now = func() time.Time { return now }
	for i := range 2 {
		if d, _ := b.Reserve(t.Context(), "k"); d != 0 {
			t.Fatalf("reserve %d of the burst waits %v", i, d)
		}
	}
	if d, _ := b.Reserve(t.Context(), "k"); d != time.Second {
		t.Fatalf("third reserve wait = %v, want 1s", d)
	}
	if d, _ := b.Reserve(t.Context(), "other"); d != 0 {
		t.Fatal("keys share a bucket")
	}
	now = now.Add(10 * time.Second)
	if d, _ := b.Reserve(t.Context(), "k"); d != 0 {
		t.Fatal("bucket did not refill")
	}
}

func TestInboxSurvivesReopenAndTornTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "inbox.jsonl")
	ib, err := OpenInbox(p)
	if err != nil {
		t.Fatal(err)
	}
	add := func(ib *LocalInbox, data string) string {
		t.Helper()
		id, durable, err := ib.Enqueue(t.Context(), "k", []byte(data))
		if err == nil {
			err = durable()
		}
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	id1 := add(ib, `{"text":"one"}`)
	id2 := add(ib, `{"text":"two"}`)
	if err := ib.Ack(t.Context(), "k", id1); err != nil {
		t.Fatal(err)
	}
	ib.Close()
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"op":"add","id":"torn","da`)
	f.Close()
	ib2, err := OpenInbox(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ib2.Close()
	got, _ := ib2.Pending(t.Context(), "k")
	if len(got) != 1 || got[0].ID != id2 || got[0].Key != "k" || string(got[0].Data) != `{"text":"two"}` {
		t.Fatalf("Pending after reopen = %+v", got)
	}
	add(ib2, `{"text":"three"}`)
	if ib2.Len() != 2 {
		t.Fatalf("len after reopen and enqueue = %d", ib2.Len())
	}
}

// An inbox written before items had keys: its items come back under "".
func TestInboxWithoutKeys(t *testing.T) {
	p := filepath.Join(t.TempDir(), "inbox.jsonl")
	old := `{"op":"add","id":"a1","data":{"text":"old"}}` + "\n" + `{"op":"clean"}` + "\n"
	if err := os.WriteFile(p, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	ib, err := OpenInbox(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ib.Close()
	keys, _ := ib.Keys(t.Context())
	got, err := ib.Claim(t.Context(), "")
	if err != nil || len(keys) != 1 || keys[0] != "" || len(got) != 1 || got[0].ID != "a1" {
		t.Fatalf("keys %q, claimed %+v, %v", keys, got, err)
	}
}
