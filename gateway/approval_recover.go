package gateway

import (
	"context"
	"encoding/json"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// decideRecovered handles a decision about an approval whose run no longer
// exists (pibot restarted while it waited): the decision is recorded, the
// tool call gets its result (the tool runs if allowed), and the run
// continues from there.
func (a *approvals) decideRecovered(ctx context.Context, in chat.Inbound, id, d string) (string, func()) {
	o, loc := a.deps.existing(ctx, in)
	if o == nil {
		return "This approval is no longer pending.", nil
	}
	ap, call, ok := findPendingApproval(o, loc, id)
	if !ok {
		return "Already decided.", nil
	}
	if refusal := a.mayDecide(in, ap, d); refusal != "" {
		return refusal, nil
	}
	o.mu.Lock()
	busy := loc.run != nil
	o.mu.Unlock()
	if busy {
		return "A run is active here; try again when it ends.", nil
	}
	site := locSite{o, loc}
	ap.By, ap.path, ap.conv, ap.site = displayName(in.User), o.path, loc.conv, site
	if in.Action != nil {
		ap.msg = in.Action.Msg // ap is this goroutine's own copy from the session
	}
	return decisionToast(d), func() {
		// The resumed run has no user message to keep it in the inbox:
		// a resume item does, so a crash during it resumes it again.
		item := inboxItem{In: chat.Inbound{Conv: loc.conv}, Resume: true}
		data, _ := json.Marshal(item)
		key := loc.key
		id, durable, err := a.deps.enqueue(ctx, key, data)
		if err == nil {
			err = durable()
		}
		if err != nil {
			a.deps.log.Error("record resume", "err", err)
		}
		a.finish(ctx, ap, d)
		if d == decideSession {
			site.grant(allowKey(ap.Requester, ap.Tool, ap.Outside))
		}
		a.resume(o, loc, &pending{item: item, inbox: inboxRef{key: key, id: id}, applied: true}, ap, call, d != decideDeny)
	}
}

// findPendingApproval looks on loc's branch for approval id without a
// decision whose tool call still has no result.
func findPendingApproval(o *owner, loc *location, id string) (*approval, llm.Content, bool) {
	branch, err := o.sess.Tree().Branch(o.head(loc))
	if err != nil {
		return nil, llm.Content{}, false
	}
	var ap *approval
	results := map[string]bool{}
	calls := map[string]llm.Content{}
	for _, e := range branch {
		switch {
		case e.Type == session.TypeCustom && e.CustomType == customApproval:
			var a approval
			if json.Unmarshal(e.Data, &a) == nil && a.ID == id {
				if a.State == "pending" {
					ap = &a
				} else {
					ap = nil
				}
			}
		case e.Type == session.TypeMessage && e.Message != nil:
			for _, c := range e.Message.ToolCalls() {
				calls[c.ID] = c
			}
			if e.Message.Role == llm.RoleToolResult {
				results[e.Message.ToolCallID] = true
			}
		}
	}
	if ap == nil || results[ap.ToolCall] {
		return nil, llm.Content{}, false
	}
	call, ok := calls[ap.ToolCall]
	return ap, call, ok
}

// resume starts a run that first gives the approved (or denied) call its
// result, showing it like any tool call, then continues with the model.
// The run is owned like every other: shutdown freezes it.
func (a *approvals) resume(o *owner, loc *location, token *pending, ap *approval, call llm.Content, allow bool) {
	o.runs.startWith(loc, []*pending{token}, func(ctx context.Context, r *run) bool {
		var out llm.ToolOutput
		failure := ""
		if !allow {
			failure = "The user denied this tool call."
		} else {
			var tool agent.Tool
			owner := a.deps.host.isOwner(r.loc.conv.Platform, ap.Requester)
			for _, t := range a.deps.tools(ToolRun{Attach: &attacher{r: r}, Owner: func() bool { return owner }}) {
				if t.Spec().Name == ap.Tool {
					tool = t
				}
			}
			if tool == nil {
				failure = "Tool " + ap.Tool + " not found"
			} else {
				r.ctl.ToolStart(call.ID, call.Name, call.Arguments)
				var err error
				if out, err = tool.Execute(ctx, call.ID, call.Arguments, func(llm.ToolOutput) {}); err != nil {
					failure = err.Error()
				}
			}
		}
		if failure != "" {
			out = llm.ToolOutput{Content: []llm.Content{llm.TextBlock(failure)}}
		}
		r.ctl.ToolEnd(call.ID, failure != "", toolText(&out))
		msg := llm.Message{Role: llm.RoleToolResult, ToolCallID: call.ID, ToolName: call.Name, Content: out.Content, IsError: failure != "", Timestamp: time.Now().UnixMilli()}
		if out.Details != nil {
			msg.Details, _ = json.Marshal(out.Details)
		}
		if r.frozen.Load() {
			return false
		}
		if _, err := o.append(loc, session.Entry{Type: session.TypeMessage, Message: &msg}, session.SyncAlways); err != nil {
			r.fail(err)
			return false
		}
		return true
	}, nil, nil)
}
