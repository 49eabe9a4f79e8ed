package rediscluster

import (
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// The shared stores carry the gateway's cluster contract
// (cluster/contract.go); the gateway finds the abilities by type
// assertion, so these guards make losing one a compile error instead of a
// silent downgrade (cluster mode without a pump, a watch or one-trip
// admission).
var (
	_ cluster.Inbox         = (*Inbox)(nil)
	_ cluster.Consumer      = (*Inbox)(nil)
	_ cluster.Peeker        = (*Inbox)(nil)
	_ cluster.Watcher       = (*Inbox)(nil)
	_ cluster.Leaver        = (*Inbox)(nil)
	_ cluster.Beginner      = (*Inbox)(nil)
	_ cluster.Quarantiner   = (*Inbox)(nil)
	_ cluster.Syncer        = (*Inbox)(nil)
	_ cluster.Dedupe        = (*Dedupe)(nil)
	_ cluster.Committer     = (*Dedupe)(nil)
	_ cluster.Dedupe        = (*Admission)(nil)
	_ cluster.Committer     = (*Admission)(nil)
	_ cluster.SeenReserver  = (*Admission)(nil)
	_ cluster.Admitter      = (*Admission)(nil)
	_ cluster.Budget        = (*Budget)(nil)
	_ cluster.Index         = (*Index)(nil)
	_ cluster.Locker        = (*Locker)(nil)
	_ cluster.LeaseProber   = (*Locker)(nil)
	_ cluster.Lease         = (*Lease)(nil)
	_ cluster.DeadlineLease = (*Lease)(nil)

	// The adapters' outbound pacing shared by the replicas.
	_ tokenbucket.Rates       = (*Rates)(nil)
	_ tokenbucket.SharedPause = (*Rates)(nil)
)
