package cluster

import (
	"errors"
	"testing"
)

func TestReplicaID(t *testing.T) {
	tests := []struct{ host, listen, want string }{
		{"node-1", "0.0.0.0:8080", "node-1-0.0.0.0_8080"},
		{"node-1", ":8081", "node-1-_8081"},
		{"h", "", "h"},
		{"a/b", "[::1]:80", "a_b-___1__80"},
	}
	for _, tc := range tests {
		if got := ReplicaID(tc.host, tc.listen); got != tc.want {
			t.Errorf("ReplicaID(%q, %q) = %q, want %q", tc.host, tc.listen, got, tc.want)
		}
	}
}

// TestReplicaLock: replicas share a directory, one identity runs once,
// and a pibot running alone excludes replicas and is excluded by them.
func TestReplicaLock(t *testing.T) {
	dir := t.TempDir()
	a, err := LockReplica(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := LockReplica(dir, "b")
	if err != nil {
		t.Fatalf("a second replica on the shared directory: %v", err)
	}
	if _, err := LockReplica(dir, "a"); !errors.Is(err, ErrLocked) {
		t.Fatalf("the same replica twice: %v, want ErrLocked", err)
	}
	if _, err := LockDir(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("a lone pibot beside replicas: %v, want ErrLocked", err)
	}
	if err := a.Unlock(); err != nil {
		t.Fatal(err)
	}
	a2, err := LockReplica(dir, "a")
	if err != nil {
		t.Fatalf("replica a after its stop: %v", err)
	}
	for _, l := range []*ReplicaLock{a2, b} {
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
	alone, err := LockDir(dir)
	if err != nil {
		t.Fatalf("a lone pibot once the replicas stopped: %v", err)
	}
	defer alone.Unlock()
	if _, err := LockReplica(dir, "c"); !errors.Is(err, ErrLocked) {
		t.Fatalf("a replica beside a lone pibot: %v, want ErrLocked", err)
	}
	for _, bad := range []string{"", "..", "a/b"} {
		if _, err := LockReplica(dir, bad); err == nil || errors.Is(err, ErrLocked) {
			t.Errorf("LockReplica(%q) = %v, want a clear refusal", bad, err)
		}
	}
}
