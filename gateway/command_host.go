package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/pibot/pibot/chat"
)

// gatewayHost gives commands and approvals what they need of the gateway
// (approvalHost, commandChat, commandSessions). It is the one place where
// they are tied to it: neither type holds a *Gateway.
type gatewayHost struct{ g *Gateway }

// wireCommands builds the approvals and the command table of g.
func wireCommands(g *Gateway) {
	h := gatewayHost{g}
	ws := absWorkspace(g.cfg.Workspace)
	g.approval = newApprovals(approvalDeps{
		policy: approvalPolicy{
			dm:            g.cfg.DMApprovals,
			group:         g.cfg.GroupApprovals,
			toolPaths:     g.cfg.ToolPaths,
			workspaceOnly: g.cfg.WorkspaceOnly,
			nonOwnersOnly: g.cfg.NonOwnersWorkspaceOnly,
			workspace:     ws,
			timeout:       g.cfg.ApprovalTimeout,
		},
		host:     h,
		log:      g.log,
		existing: h.existing,
		enqueue:  g.inbox.Enqueue,
		tools:    g.cfg.Tools,
		agents:   agentPolicies(g.agents, g.cfg.ApprovalTimeout),
	})
	g.commands = &commands{
		table:     agentsCommandTable(g.agents, g.log),
		skills:    g.cfg.Extensions != nil,
		ext:       g.cfg.Extensions,
		log:       g.log,
		rights:    g.access,
		models:    g.models,
		model:     g.cfg.Model,
		approvals: g.approval,
		spend:     g.spend,
		chat:      h,
		sessions:  h,
	}
}

func (h gatewayHost) send(ctx context.Context, conv chat.ConvRef, out chat.Out) (chat.MsgRef, error) {
	ad := h.g.adapters[conv.Platform]
	if ad == nil {
		return chat.MsgRef{}, fmt.Errorf("no adapter for %s", conv.Platform)
	}
	return ad.Send(ctx, conv, out)
}

func (h gatewayHost) editLater(ref chat.MsgRef, out chat.Out) {
	ad := h.g.adapters[ref.Conv.Platform]
	if ad == nil {
		return
	}
	h.g.work.track(func(ctx context.Context) { h.g.replier.editRetry(ctx, ad, ref, out) })
}

func (h gatewayHost) isOwner(p chat.Platform, user string) bool { return h.g.access.IsOwner(p, user) }

func (h gatewayHost) timer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

func (h gatewayHost) reply(ctx context.Context, in chat.Inbound, md string) {
	h.g.replier.reply(ctx, in, md)
}

// answer answers a press through its interaction, or, where the platform
// has none, with a short reply.
func (h gatewayHost) answer(ctx context.Context, in chat.Inbound, toast string) {
	if r, ok := h.g.adapters[in.Conv.Platform].(chat.Responder); ok && in.Interaction != nil {
		if _, err := r.Answer(ctx, *in.Interaction, chat.Answer{Toast: toast}); err != nil {
			h.g.log.Debug("respond to action", "err", err)
		}
	} else if toast != "" {
		h.g.replier.reply(ctx, in, "_"+toast+"_")
	}
}

func (h gatewayHost) locate(ctx context.Context, in chat.Inbound) (*owner, *location, error) {
	return h.g.sessions.locate(ctx, in)
}

// existing returns the owner and location of in's conversation, if bound.
func (h gatewayHost) existing(ctx context.Context, in chat.Inbound) (*owner, *location) {
	path, ok, err := h.g.index.Get(ctx, in.Conv.Key())
	if err != nil {
		h.g.log.Warn("index: look up a conversation", "conv", in.Conv.Key(), "err", err)
		return nil, nil
	}
	if !ok {
		return nil, nil
	}
	o, err := h.g.sessions.owner(ctx, path, nil)
	if err != nil {
		return nil, nil
	}
	return o, o.location(in.Conv.Key(), in.Conv)
}

func (h gatewayHost) chosen(in chat.Inbound) agentRecord { return h.g.choose(in) }

func (h gatewayHost) agentNames() []string { return h.g.agents.names() }

func (h gatewayHost) startAgent(ctx context.Context, conv chat.ConvRef, rec agentRecord) error {
	h.g.sessions.located.forget(conv.Key())
	_, _, err := h.g.sessions.newSession(ctx, conv, rec)
	return err
}

func (h gatewayHost) unbind(ctx context.Context, convKey string) error {
	h.g.sessions.located.forget(convKey)
	return h.g.index.Set(ctx, convKey, "")
}

func (h gatewayHost) respond(ctx context.Context, in chat.Inbound, md string, private bool) {
	h.g.replier.respond(ctx, in, md, private)
}

func (h gatewayHost) target(ctx context.Context, conv chat.ConvRef) chat.ConvRef {
	return h.g.threads.target(ctx, conv)
}
