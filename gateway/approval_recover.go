package gateway

import (
	"context"
	"encoding/json"
	"fmt"
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
		if in.Kind != chat.KindAction {
			return unknownApproval, nil // typed: no session here, so nothing was asked here
		}
		return "This approval is no longer pending.", nil
	}
	ap, call, state := findPendingApproval(o, loc, id)
	switch state {
	case approvalUnknown:
		return unknownApproval, nil
	case approvalDone:
		return "Already decided.", nil
	}
	if refusal := a.mayDecide(in, ap, d); refusal != "" {
		return refusal, nil
	}
	busy := o.activeRun(loc) != nil
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

// unknownApproval answers /approve or /deny with an id that was never
// asked where it is typed. The id is not repeated (it is the user's text).
const unknownApproval = "No approval with that id was asked here. Without an id, the command decides the one waiting here."

// approvalState is what a location's branch says about an approval id.
type approvalState int

const (
	approvalUnknown approvalState = iota // never asked on the branch
	approvalDone                         // decided, or its call has a result
	approvalWaiting                      // asked, not decided, its call without a result
)

// findPendingApproval looks on loc's branch for approval id without a
// decision whose tool call still has no result.
func findPendingApproval(o *owner, loc *location, id string) (*approval, llm.Content, approvalState) {
	branch, err := o.view(loc).branch()
	if err != nil {
		return nil, llm.Content{}, approvalUnknown
	}
	seen := false
	var ap *approval
	results := map[string]bool{}
	calls := map[string]llm.Content{}
	for _, e := range branch {
		switch {
		case e.Type == session.TypeCustom && e.CustomType == customApproval:
			var a approval
			if json.Unmarshal(e.Data, &a) == nil && a.ID == id {
				seen = true
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
	if !seen {
		return nil, llm.Content{}, approvalUnknown
	}
	if ap == nil || results[ap.ToolCall] {
		return nil, llm.Content{}, approvalDone
	}
	call, ok := calls[ap.ToolCall]
	if !ok {
		return nil, llm.Content{}, approvalDone
	}
	return ap, call, approvalWaiting
}

// resume starts a run that first gives the approved (or denied) call its
// result, showing it like any tool call, then continues with the model.
// The run is owned like every other: shutdown freezes it.
func (a *approvals) resume(o *owner, loc *location, token *pending, ap *approval, call llm.Content, allow bool) {
	o.runs.startWith(loc, []*pending{token}, func(ctx context.Context, r *run) bool {
		var res agent.ToolResult
		if allow {
			res = a.runApproved(ctx, r, ap, call)
		} else {
			res = errorResult("The user denied this tool call.")
		}
		out := llm.ToolOutput{Content: res.Content, Details: res.Details}
		r.reply.ctl.ToolEnd(call.ID, res.IsError, toolText(&out))
		msg := llm.Message{Role: llm.RoleToolResult, ToolCallID: call.ID, ToolName: call.Name, Content: res.Content, IsError: res.IsError, Timestamp: time.Now().UnixMilli()}
		if res.Details != nil {
			msg.Details, _ = json.Marshal(res.Details)
		}
		if r.journal.frozen() {
			return false
		}
		if _, err := o.append(loc, session.Entry{Type: session.TypeMessage, Message: &msg}, session.SyncAlways); err != nil {
			r.fail(err)
			return false
		}
		return true
	}, nil, nil)
}

// runApproved runs the call ap allowed as a run would have: with the
// arguments the approval showed (what the tool_call hooks made of the
// model's, recorded in ap), unless its tool is denied here by now (a
// reload or restart changed the policy), and with its result passed
// through the tool_result hooks.
func (a *approvals) runApproved(ctx context.Context, r *run, ap *approval, call llm.Content) agent.ToolResult {
	if a.policyFor(r.o.agentRec().Name, r.loc.conv, ap.Tool) == "deny" {
		return errorResult(fmt.Sprintf("The %s tool is disabled in this chat.", ap.Tool))
	}
	if len(ap.Args) == 0 || ap.Tool != call.Name {
		return errorResult("The approval does not record the call it allowed, so nothing was run.")
	}
	var tool agent.Tool
	owner := a.deps.host.isOwner(r.loc.conv.Platform, ap.Requester)
	for _, t := range r.o.agentConfig().Tools(ToolRun{Attach: &attacher{r: r}, Dir: r.wt.dir(), Owner: func() bool { return owner }}) {
		if t.Spec().Name == ap.Tool {
			tool = t
		}
	}
	if tool == nil {
		return errorResult("Tool " + ap.Tool + " not found")
	}
	r.reply.ctl.ToolStart(call.ID, call.Name, ap.Args)
	var res agent.ToolResult
	if out, err := tool.Execute(ctx, call.ID, ap.Args, func(llm.ToolOutput) {}); err != nil {
		res = errorResult(err.Error())
	} else {
		res = agent.ToolResult{Content: out.Content, Details: out.Details}
	}
	if after := r.hooks().AfterToolCall; after != nil {
		tc := agent.ToolCall{ID: call.ID, Name: call.Name, Args: ap.Args}
		if err := after(ctx, tc, &res); err != nil {
			res = errorResult(err.Error())
		}
	}
	return res
}

// errorResult is a tool result that is an error with text, as the agent
// loop makes them.
func errorResult(text string) agent.ToolResult {
	return agent.ToolResult{Content: []llm.Content{llm.TextBlock(text)}, Details: map[string]any{}, IsError: true}
}
