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
type RoundTrips struct {
	mu    sync.Mutex
	calls []string
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
		r.add(name(cmd))
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline (or a transaction) once.
func (r *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, 0, len(cmds))
		for _, c := range cmds {
			names = append(names, name(c))
		}
		r.add("pipeline[" + strings.Join(names, ", ") + "]")
		return next(ctx, cmds)
	}
}

func (r *RoundTrips) add(call string) {
	r.mu.Lock()
	r.calls = append(r.calls, call)
	r.mu.Unlock()
}

// Count returns the round trips so far.
func (r *RoundTrips) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// Since returns the round trips made after the first n, by name.
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
