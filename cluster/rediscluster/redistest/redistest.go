// Package redistest gives tests the Redis servers they run on:
// miniredis, whose clock moves only when told; the real redis-server at
// 127.0.0.1:6379 (or one started for the test binary when nothing answers
// there); and private redis-servers a chaos test may kill and restart.
// Tests on the shared server use a random key prefix whose keys are
// deleted when the test ends.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Backend is a Redis the tests run on: miniredis (its clock moves only
// when told) or a real redis-server.
type Backend struct {
	Name string
	// Open returns a client to a store of its own: a fresh miniredis, or
	// a random key prefix on the real server whose keys are deleted when
	// the test ends. Clients opened with the same store name in one test
	// share the store.
	Open func(t testing.TB, store string) (rdb *redis.Client, prefix string, mr *miniredis.Miniredis)
}

// Backends returns miniredis and, when a redis-server binary exists, the
// real server.
func Backends(t *testing.T) []Backend {
	bs := []Backend{{Name: "miniredis", Open: openMini()}}
	if addr := RealAddr(t); addr != "" {
		bs = append(bs, Backend{Name: "redis", Open: OpenReal(addr)})
	}
	return bs
}

func openMini() func(t testing.TB, store string) (*redis.Client, string, *miniredis.Miniredis) {
	var mu sync.Mutex
	stores := map[string]*miniredis.Miniredis{}
	return func(t testing.TB, store string) (*redis.Client, string, *miniredis.Miniredis) {
		mu.Lock()
		mr, ok := stores[store]
		if !ok {
			mr = miniredis.NewMiniRedis()
			if err := mr.Start(); err != nil {
				mu.Unlock()
				t.Fatal(err)
			}
			stores[store] = mr
			t.Cleanup(func() {
				mu.Lock()
				delete(stores, store)
				mu.Unlock()
				mr.Close()
			})
		}
		mu.Unlock()
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb, "pibot:", mr
	}
}

func OpenReal(addr string) func(t testing.TB, store string) (*redis.Client, string, *miniredis.Miniredis) {
	var mu sync.Mutex
	prefixes := map[string]string{}
	return func(t testing.TB, store string) (*redis.Client, string, *miniredis.Miniredis) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = rdb.Close() })
		mu.Lock()
		defer mu.Unlock()
		p, ok := prefixes[store]
		if !ok {
			p = randomPrefix(t)
			prefixes[store] = p
			t.Cleanup(func() { deletePrefix(t, addr, p) })
		}
		return rdb, p, nil
	}
}

// randomPrefix is a key prefix no other test uses.
func randomPrefix(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "pibottest:" + hex.EncodeToString(b[:]) + ":"
}

// deletePrefix deletes every key under prefix.
func deletePrefix(t testing.TB, addr, prefix string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Logf("clean-up of %s*: %v", prefix, err)
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := rdb.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Logf("clean-up of %s*: %v", prefix, err)
			return
		}
		keys = keys[n:]
	}
}

// LocalPrefix returns a client of the test's own to the redis-server at
// 127.0.0.1:6379 (the address a `pibot serve` under test is given) and a
// key prefix whose keys are deleted when the test ends. It skips the test
// when the tests use another server or none answers there.
func LocalPrefix(t testing.TB, store string) (*redis.Client, string) {
	t.Helper()
	const local = "127.0.0.1:6379"
	if RealAddr(t) != local {
		t.Skip("needs the redis-server at " + local)
	}
	rdb, prefix, _ := OpenReal(local)(t, store)
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Skipf("no redis-server at %s: %v", local, err)
	}
	return rdb, prefix
}

// RealAddr returns the address of the shared redis-server at
// 127.0.0.1:6379 or, when nothing answers there, of one started for this
// test binary. It returns "" (and the test skips the real server) only
// when no redis-server binary exists.
func RealAddr(t testing.TB) string {
	realOnce.Do(func() {
		const shared = "127.0.0.1:6379"
		if ping(shared) == nil {
			realAddr = shared
			return
		}
		if _, err := exec.LookPath("redis-server"); err != nil {
			return
		}
		dir, err := os.MkdirTemp("", "pibot-redis-")
		if err != nil {
			return
		}
		// Owned by the test binary: TestMain kills it at the end.
		srv, err := startServer(dir, 0)
		if err != nil {
			realErr = err
			return
		}
		realSrv = srv
		realAddr = srv.Addr
	})
	if realAddr == "" {
		if realErr != nil {
			t.Fatalf("starting redis-server: %v", realErr)
		}
		t.Log("no redis-server binary: tests run on miniredis only")
	}
	return realAddr
}

var (
	realOnce sync.Once
	realAddr string
	realErr  error
	realSrv  *Server
)

// Main runs the tests of a package and stops the redis-server RealAddr
// may have started; call it from TestMain: os.Exit(redistest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if realSrv != nil {
		realSrv.Kill()
		_ = os.RemoveAll(realSrv.dir)
	}
	return code
}

func ping(addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

// Server is a redis-server process of a test, without persistence.
type Server struct {
	// Addr is host:port.
	Addr string
	dir  string
	port int
	args []string // extra redis-server arguments
	cmd  *exec.Cmd
}

// startServer starts redis-server on port (0: a free one) in dir and
// waits until it answers.
func startServer(dir string, port int, extra ...string) (*Server, error) {
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	s := &Server{dir: dir, port: port, args: extra, Addr: "127.0.0.1:" + strconv.Itoa(port)}
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, extra...)
	s.cmd = exec.Command("redis-server", args...)
	s.cmd.Stdout, s.cmd.Stderr = io.Discard, io.Discard
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ping(s.Addr) != nil {
		if time.Now().After(deadline) {
			s.Kill()
			return nil, fmt.Errorf("redis-server on %s did not answer", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s, nil
}

// Kill ends the server the way a crash does (SIGKILL): what it held is
// gone, as with a Redis that runs without persistence.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// PrivateServer starts a redis-server the test may kill, restart and
// flush, with args added to its command line (e.g. "--requirepass", "pw"),
// skipping the test when no redis-server binary exists.
func PrivateServer(t testing.TB, args ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server binary: chaos tests need a real Redis")
	}
	s, err := startServer(t.TempDir(), 0, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Client returns a client of the test's own to the server, closed when
// the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Restart kills the server and starts an empty one on the same port.
func (s *Server) Restart(t *testing.T) {
	t.Helper()
	s.Kill()
	ns, err := startServer(s.dir, s.port, s.args...)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = ns.cmd
}
