package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/internal/sessionview"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// maintenance returns pi's compaction rules for this run: after the run an
// overflow is compacted and continued once, a context over the threshold is
// compacted. Compactions are written to the session at the location's head.
func (r *run) maintenance() *agent.Maintenance {
	o, loc := r.o, r.loc
	return agent.NewMaintenance(o.g.cfg.Compaction, func(ctx context.Context, reason, instructions string) (*compaction.Result, []llm.Message, error) {
		res, err := o.compactNow(ctx, loc, r.model, instructions)
		if err != nil {
			return nil, nil, err
		}
		msgs, _, _, err := o.contextFor(loc)
		if err != nil {
			return nil, nil, err
		}
		return &res, msgs, nil
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
	res, err := sessionview.Summarize(ctx, o.sess, o.head(loc), model, o.g.cfg.Compaction, instructions, model.Info().ClampThinking(thinking))
	if err != nil {
		return compaction.Result{}, err
	}
	if _, err := o.append(loc, sessionview.CompactionEntry(res), session.SyncAlways); err != nil {
		return compaction.Result{}, fmt.Errorf("record compaction: %w", err)
	}
	return res, nil
}
