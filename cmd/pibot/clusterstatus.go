package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway"
)

// runCluster runs `pibot cluster status`: the leases held now in the
// Redis of cluster.redis_url, grouped by replica, leader roles apart.
func runCluster(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 || args[0] != "status" {
		return usageErr("cluster: want status")
	}
	fs := c.newFlags("cluster status")
	file := configFlag(fs)
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if err := wantArgs("cluster status", pos, 0, "no arguments"); err != nil {
		return err
	}
	cfg, _, err := c.loadConfig(*file)
	if err != nil {
		return err
	}
	if cfg.Cluster.RedisURL == "" {
		return &config.Error{Key: "cluster.redis_url", Msg: "is empty: this pibot runs as one process, not a cluster"}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opt, err := rediscluster.ParseURL(cfg.Cluster.RedisURL)
	if err != nil {
		return &config.Error{Key: "cluster.redis_url", Msg: err.Error()}
	}
	rdb, err := rediscluster.Dial(ctx, cfg.Cluster.RedisURL)
	if err != nil {
		return redisUnreachable(opt.Addr, err)
	}
	defer rdb.Close()
	held, err := rediscluster.NewLocker(rdb, rediscluster.Options{Prefix: cfg.Cluster.KeyPrefix}, nil).Held(ctx)
	if err != nil {
		return redisUnreachable(opt.Addr, err)
	}
	return writeClusterStatus(c.stdout, held)
}

// redisUnreachable is the one error a command prints when the Redis at
// addr (cluster.redis_url, without its password) does not answer: the
// address and why, in a line.
func redisUnreachable(addr string, err error) error {
	why := err.Error()
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		why = errno.Error()
	case errors.Is(err, context.DeadlineExceeded):
		why = "no answer in time"
	}
	return fmt.Errorf("cluster status: cannot reach Redis at %s (cluster.redis_url): %s", addr, why)
}

// writeClusterStatus prints the replicas with their sessions and roles.
func writeClusterStatus(w interface{ Write([]byte) (int, error) }, held []rediscluster.Held) error {
	byReplica := map[string][]rediscluster.Held{}
	for _, h := range held {
		if strings.HasPrefix(h.Key, "inbox:") {
			continue // a takeover in progress, held for a moment
		}
		byReplica[h.Holder] = append(byReplica[h.Holder], h)
	}
	if len(byReplica) == 0 {
		_, err := fmt.Fprintln(w, "no replica holds a lease (none running, or all idle)")
		return err
	}
	replicas := make([]string, 0, len(byReplica))
	for r := range byReplica {
		replicas = append(replicas, r)
	}
	sort.Strings(replicas)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tKIND\tLEASE\tFENCE\tTTL")
	for _, r := range replicas {
		for _, h := range byReplica[r] {
			kind, key := leaseKind(h.Key)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r, kind, key, h.Fence, h.TTL.Round(time.Millisecond))
		}
	}
	return errors.Join(tw.Flush())
}

// leaseKind tells a leader role (a singleton adapter, the schedules) from
// a session's lease, and names what the lease is for.
func leaseKind(key string) (kind, name string) {
	if k, ok := strings.CutPrefix(key, gateway.AdapterLeasePrefix); ok {
		return "leader", k
	}
	if key == gateway.SchedulesLease {
		return "leader", key
	}
	return "session", key
}
