package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redispairing"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway/access"
)

// pairingAdmin is what the pairing commands change: the file store
// (access.Store) or a store the replicas of a cluster share.
type pairingAdmin interface {
	Approve(ctx context.Context, platform, code string) (access.Pairing, error)
	Revoke(ctx context.Context, platform, user string) (bool, error)
	List(ctx context.Context) ([]access.Request, []access.Pairing, error)
}

var (
	_ pairingAdmin = (*access.Store)(nil)
	_ pairingAdmin = (*redispairing.Pairings)(nil)
)

// pairingCmd is `pibot pairing list|approve|revoke`.
type pairingCmd struct{ *cli }

// run runs `pibot pairing list|approve|revoke` on <data_dir>/pairing.json
// of the configuration (the one `pibot serve` uses: -c or $PIBOT_CONFIG),
// without needing the platforms' tokens; in cluster mode on the store the
// replicas share in Redis. A running pibot rereads the store on every
// check, so changes apply at once, and tells an approved user in their
// chat that they may talk now.
func (c pairingCmd) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErr("pairing: want list, approve PLATFORM CODE or revoke PLATFORM USER")
	}
	sub := args[0]
	fs := c.newFlags("pairing " + sub)
	file := configFlag(fs)
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		err = wantArgs("pairing list", pos, 0, "no arguments")
	case "approve":
		err = wantArgs("pairing approve", pos, 2, "PLATFORM CODE")
	case "revoke":
		err = wantArgs("pairing revoke", pos, 2, "PLATFORM USER")
	default:
		return usageErr("pairing: unknown subcommand %q (want list, approve or revoke)", sub)
	}
	if err != nil {
		return err
	}
	cfg, err := c.loadOfflineConfig(*file)
	if err != nil {
		return err
	}
	var store pairingAdmin
	if cfg.Cluster.RedisURL != "" {
		// Cluster mode: the replicas share the store in Redis.
		keys, err := clusterKeys(cfg)
		if err != nil {
			return err
		}
		rdb, err := rediscluster.Dial(ctx, cfg.Cluster.RedisURL)
		if err != nil {
			return &config.Error{Key: "cluster.redis_url", Msg: err.Error()}
		}
		defer rdb.Close()
		store = redispairing.NewPairings(rdb, rediscluster.Options{Prefix: cfg.Cluster.KeyPrefix, Keys: keys,
			OnForged: func(string, string) {
				fmt.Fprintln(c.stderr, "pibot: warning: the pairing record in Redis is not sealed with cluster.secret; it is read as empty")
			}})
	} else {
		if err := haveDataDir(cfg); err != nil {
			return fmt.Errorf("pairing: %w", err)
		}
		if err := foreignDataDir(cfg, append([]string{"pairing", sub}, pos...)); err != nil {
			if sub != "list" {
				return fmt.Errorf("pairing: %w", err)
			}
			fmt.Fprintf(c.stderr, "pibot: note: %v\n", err) // reading changes nothing
		}
		fileStore, err := access.OpenStore(dataPath(cfg, "pairing.json"))
		if err != nil {
			return err
		}
		store = fileStore
	}
	switch sub {
	case "approve":
		p, err := store.Approve(ctx, pos[0], pos[1])
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "approved %s:%s%s\n", p.Platform, p.User, nameSuffix(p.Name))
	case "revoke":
		found, err := store.Revoke(ctx, pos[0], pos[1])
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("pairing revoke: %s:%s is not paired", pos[0], pos[1])
		}
		fmt.Fprintf(c.stdout, "revoked %s:%s\n", pos[0], pos[1])
	default:
		return c.list(ctx, store)
	}
	return nil
}

// list prints the pending codes and the paired users.
func (c pairingCmd) list(ctx context.Context, store pairingAdmin) error {
	pending, approved, err := store.List(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tPLATFORM\tUSER\tNAME\tCODE\tSINCE")
	for _, r := range pending {
		fmt.Fprintf(tw, "pending\t%s\t%s\t%s\t%s\t%s\n", r.Platform, r.User, r.Name, r.Code, r.Created.UTC().Format(time.RFC3339))
	}
	for _, p := range approved {
		fmt.Fprintf(tw, "approved\t%s\t%s\t%s\t-\t%s\n", p.Platform, p.User, p.Name, p.Approved.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}
