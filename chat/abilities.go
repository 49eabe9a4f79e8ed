package chat

import (
	"context"
	"time"
)

// BoundedRunner is an adapter that can bound what it does by the lease it
// runs under (a Singleton whose platform allows one receiver at a time:
// telegram.Adapter's long polls). RunBounded is Run, with held returning
// how long the lease is sure to stay held from now on (it grows with each
// renewal; nil: no bound, as Run). Each wait on the platform then ends,
// on the platform's side, before the lease may pass to another replica.
// The gateway calls it instead of Run when the lease knows its deadline.
type BoundedRunner interface {
	RunBounded(ctx context.Context, sink Sink, held func() time.Duration) error
}

// HealthReporter is an adapter that can stop working on its own while
// pibot runs (the platform refused its token, it is still waiting for
// the platform to answer at start): Health returns nil while it can work,
// or why it cannot. pibot fails /readyz with the error and keeps serving
// the other adapters.
type HealthReporter interface {
	Health() error
}
