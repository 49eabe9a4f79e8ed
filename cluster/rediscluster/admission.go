package rediscluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Admission asks the dedupe and the per-sender budget about one inbound
// event in one round trip: SeenReserve (a pipeline of the two scripts),
// or Admit, which enqueues the event's item in the same round trip. It is
// the Dedupe it was given, plus SeenReserve and Admit.
type Admission struct {
	*Dedupe
	budget *Budget
	inbox  *Inbox
	log    *slog.Logger
}

// NewAdmission pairs the replica's dedupe and sender budget (the one the
// gateway is given as its Budget) with its inbox; all must be on one
// Redis client and key prefix. log may be nil.
func NewAdmission(d *Dedupe, b *Budget, ib *Inbox, log *slog.Logger) *Admission {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Admission{Dedupe: d, budget: b, inbox: ib, log: log}
}

// SeenReserve records key as Seen does and takes a token of budgetKey's
// bucket as Budget.Reserve does, in one round trip. A duplicate, and an
// event in flight (cluster.ErrInFlight), is given its token back (a redelivery costs its sender nothing; a refund is one
// more round trip, for duplicates only). err is the dedupe's failure; a
// budget that cannot be asked is logged and answers 0, as the gateway
// treats a failing Reserve: it does not stop messages.
func (a *Admission) SeenReserve(ctx context.Context, key, budgetKey string) (dup bool, wait time.Duration, err error) {
	if a.budget.rate <= 0 {
		dup, err = a.Seen(ctx, key)
		return dup, 0, err
	}
	seenToken, err := newToken()
	if err != nil {
		return false, 0, err
	}
	callTok, err := callToken()
	if err != nil {
		return false, 0, err
	}
	seenKeys, seenArgs := []string{a.prefix + key}, []any{seenToken, a.pending.Milliseconds()}
	budgetKeys, budgetArgs := a.budget.keys(budgetKey), a.budget.args("reserve", callTok)
	pipe := a.rdb.Pipeline()
	seen := pipe.EvalSha(ctx, seenScript().Hash(), seenKeys, seenArgs...)
	reserved := pipe.EvalSha(ctx, bucketScript().Hash(), budgetKeys, budgetArgs...)
	_, _ = pipe.Exec(ctx) // each command keeps its own answer
	// A Redis that does not have the scripts yet (restarted, flushed)
	// runs them again from their source, with the same call tokens: the
	// scripts recognise a call that already ran.
	if isNoScript(seen.Err()) {
		seen = seenScript().Run(ctx, a.rdb, seenKeys, seenArgs...)
	}
	if isNoScript(reserved.Err()) {
		reserved = bucketScript().Run(ctx, a.rdb, budgetKeys, budgetArgs...)
	}
	n, err := seen.Int64()
	if err != nil {
		return false, 0, fmt.Errorf("rediscluster: dedupe: %w", err)
	}
	us, berr := reserved.Int64()
	switch {
	case berr != nil:
		a.log.Warn("sender budget unavailable; message let through", "err", berr)
		dup, err := seenAnswer(n)
		return dup, 0, err
	case n == 1 || n == 2:
		// A duplicate, or one in flight (refused, delivered again).
		if rerr := a.refund(ctx, budgetKey); rerr != nil {
			a.log.Warn("sender budget: give a duplicate's token back", "err", rerr)
		}
		dup, err := seenAnswer(n)
		return dup, 0, err
	}
	return false, time.Duration(us) * time.Microsecond, nil
}

// refund gives a token back to budgetKey's bucket.
func (a *Admission) refund(ctx context.Context, budgetKey string) error {
	token, err := callToken()
	if err != nil {
		return err
	}
	return bucketScript().Run(ctx, a.rdb, a.budget.keys(budgetKey), a.budget.args("refund", token)...).Err()
}

// isNoScript reports whether err says Redis does not have a script.
func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}
