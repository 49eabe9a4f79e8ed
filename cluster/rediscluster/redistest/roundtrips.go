package redistest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// RoundTrips is a go-redis hook that counts the round trips a client
// makes (a command, or a pipeline, is one) and names each: the command,
// and for a script the first key it names. Add it with rdb.AddHook.
//
// The handshake go-redis makes on each connection it opens (HELLO, then
// CLIENT SETINFO) is counted apart, in Handshakes: a pool opens a
// connection when all of its others are busy, which depends on what else
// the client is doing at that moment (a loaded machine makes calls
// overlap more), not on the work being counted.
type RoundTrips struct {
	mu         sync.Mutex
	calls      []string
	handshakes []string
}

var _ redis.Hook = (*RoundTrips)(nil)

// DialHook passes dials through.
func (r *RoundTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook counts one command.
func (r *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.add(name(cmd), handshake(cmd))
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline (or a transaction) once.
func (r *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, 0, len(cmds))
		setup := len(cmds) > 0
		for _, c := range cmds {
			names = append(names, name(c))
			setup = setup && handshake(c)
		}
		r.add("pipeline["+strings.Join(names, ", ")+"]", setup)
		return next(ctx, cmds)
	}
}

func (r *RoundTrips) add(call string, setup bool) {
	r.mu.Lock()
	if setup {
		r.handshakes = append(r.handshakes, call)
	} else {
		r.calls = append(r.calls, call)
	}
	r.mu.Unlock()
}

// handshake reports whether cmd is one go-redis sends to set up a new
// connection: pibot sends none of them itself.
func handshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "auth", "select", "client":
		return true
	}
	return false
}

// Handshakes returns the round trips made to set up new connections so
// far, by name (not in Count or Since).
func (r *RoundTrips) Handshakes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.handshakes...)
}

// Count returns the round trips so far, handshakes left out.
func (r *RoundTrips) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// Since returns the round trips made after the first n, by name,
// handshakes left out.
func (r *RoundTrips) Since(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n > len(r.calls) {
		return nil
	}
	return append([]string(nil), r.calls[n:]...)
}

// name is the command's name; a script call adds its first key.
func name(cmd redis.Cmder) string {
	n := cmd.Name()
	args := cmd.Args()
	if (n == "evalsha" || n == "eval") && len(args) > 3 {
		return fmt.Sprintf("%s %v", n, args[3])
	}
	return n
}
