package rediscluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// helperEnv makes the test binary a lease holder (TestHelperLeaseHolder):
// "redis address|key|file".
const helperEnv = "PIBOT_TEST_LEASE_HOLDER"

// TestHelperLeaseHolder is not a test: run by TestChaosStoppedHolder as a
// separate process, it takes a lease and appends its fence to a file as
// long as the lease's deadline has not passed, checking before each
// append as a session writer does.
func TestHelperLeaseHolder(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process only")
	}
	parts := strings.Split(spec, "|")
	rdb := redis.NewClient(&redis.Options{Addr: parts[0], ContextTimeoutEnabled: true})
	l := rediscluster.NewLocker(rdb, rediscluster.Options{LeaseTTL: chaosTTL}, nil)
	got, err := l.Acquire(context.Background(), parts[1], 0)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	le := got.(*rediscluster.Lease)
	f, err := os.OpenFile(parts[2], os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("fence", le.Fence())
	for time.Now().Before(le.Deadline()) {
		fmt.Fprintf(f, "%d\n", le.Fence())
		time.Sleep(5 * time.Millisecond)
	}
	<-le.Done()
	fmt.Println("stopped", le.Err())
	os.Exit(0)
}

// A holder stopped (SIGSTOP) past its TTL and then continued (SIGCONT)
// finds its deadline passed and appends nothing more (at most the one
// append whose check it passed just before it was stopped), while the
// replica that took over has a higher fence; its Done says the lease
// expired.
func TestChaosStoppedHolder(t *testing.T) {
	srv := redistest.PrivateServer(t)
	file := filepath.Join(t.TempDir(), "session.jsonl")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLeaseHolder$")
	cmd.Env = append(os.Environ(), helperEnv+"="+srv.Addr+"|s1|"+file)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var fence int64
	select {
	case l := <-lines:
		if _, err := fmt.Sscanf(l, "fence %d", &fence); err != nil {
			t.Fatalf("helper said %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the helper took no lease")
	}
	time.Sleep(100 * time.Millisecond) // it appends

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := takeOver(t, chaosLocker(t, srv.Addr), "s1", fence)
	if b.Fence() <= fence {
		t.Fatalf("takeover fence %d is not above the stopped holder's %d", b.Fence(), fence)
	}
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-lines:
		if !strings.HasPrefix(l, "stopped ") || !strings.Contains(l, rediscluster.ErrLeaseExpired.Error()) {
			t.Fatalf("continued holder said %q, want that its lease expired", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the continued holder did not stop")
	}
	after, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if extra := strings.Count(string(after[len(before):]), "\n"); extra > 1 {
		t.Fatalf("the stale holder appended %d times after the takeover", extra)
	}
	if err := cmd.Wait(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("helper: %v", err)
	}
}
