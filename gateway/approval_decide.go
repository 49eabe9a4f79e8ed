package gateway

import (
	"context"

	"github.com/pibot/pibot/chat"
)

// decide applies a button press or /approve, /deny. It returns the toast
// at once and, when the decision was taken, the work that follows it
// (recording, editing the buttons away, resuming the run), which the
// caller runs after answering the press. An approval whose run is gone is
// decided from its session (decideRecovered).
func (a *approvals) decide(ctx context.Context, in chat.Inbound, id, d string) (string, func()) {
	a.mu.Lock()
	ap := a.pending[id]
	a.mu.Unlock()
	if ap == nil {
		return a.decideRecovered(ctx, in, id, d)
	}
	if refusal := a.mayDecide(in, ap, d); refusal != "" {
		return refusal, nil
	}
	if !a.claim(id) {
		return "Already decided.", nil
	}
	ap.By = displayName(in.User)
	return decisionToast(d), func() {
		a.finish(ctx, ap, d)
		ap.decided <- d
	}
}

// mayDecide says why in's sender may not take decision d about ap ("" if
// they may): the requester or an owner decides, and only an owner may
// allow a group's call that reaches outside the workspace (the requester
// can still deny it).
func (a *approvals) mayDecide(in chat.Inbound, ap *approval, d string) string {
	owner := a.deps.host.isOwner(in.Conv.Platform, in.User.ID)
	switch {
	case in.User.ID != ap.Requester && !owner:
		return "Only the person who asked, or an owner, can decide."
	case ap.Outside && d != decideDeny && !owner:
		return "Only an owner can allow access outside the workspace."
	}
	return ""
}

func decisionToast(d string) string {
	if d == decideDeny {
		return "Denied."
	}
	return "Allowed."
}

func displayName(u chat.User) string {
	if u.Name != "" {
		return u.Name
	}
	return u.ID
}
