package gateway

import (
	"context"
	"errors"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/internal/sessionrun"
	"github.com/pibot/pibot/llm"
)

// maintenance returns pi's compaction rules for this run
// (sessionrun.Maintenance), compacting at the location's head.
func (r *run) maintenance() *agent.Maintenance {
	o, loc := r.o, r.loc
	return sessionrun.Maintenance(o.cfg.Compaction,
		func(ctx context.Context, instructions string) (compaction.Result, error) {
			return o.compactNow(ctx, loc, r.model, instructions)
		},
		func() ([]llm.Message, error) {
			msgs, _, _, err := o.contextFor(loc)
			return msgs, err
		})
}

// compact summarises loc's branch (manual /compact).
func (o *owner) compact(ctx context.Context, loc *location, model llm.Model, instructions string) error {
	_, err := o.compactNow(ctx, loc, model, instructions)
	return err
}

func (o *owner) compactNow(ctx context.Context, loc *location, model llm.Model, instructions string) (compaction.Result, error) {
	if model == nil {
		return compaction.Result{}, errors.New("no model configured")
	}
	_, thinking, _, err := o.contextFor(loc)
	if err != nil {
		return compaction.Result{}, err
	}
	return sessionrun.Compact(ctx, o.sess.Tree(), locHead{f: o.sessionFile, loc: loc}, model, o.cfg.Compaction, instructions, thinking)
}
