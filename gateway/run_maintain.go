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
			return locHead{f: o.sessionFile, loc: loc}.compact(ctx, r.model, o.cfg.Compaction, instructions)
		},
		func() ([]llm.Message, error) {
			msgs, _, _, err := o.contextFor(loc)
			return msgs, err
		})
}

// compact summarises the branch at the head with model by settings (a
// run's maintenance, a manual /compact).
func (h locHead) compact(ctx context.Context, model llm.Model, settings compaction.Settings, instructions string) (compaction.Result, error) {
	if model == nil {
		return compaction.Result{}, errors.New("no model configured")
	}
	_, thinking, _, err := h.f.contextFor(h.loc)
	if err != nil {
		return compaction.Result{}, err
	}
	return sessionrun.Compact(ctx, h.f.sess.Tree(), h, model, settings, instructions, thinking)
}
