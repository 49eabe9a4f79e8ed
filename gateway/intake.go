package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/internal/otlp"
)

// intake takes events from the adapters (sink: screen, classify, admit):
// access, dedupe, the sender's budget, a durable inbox item through its
// admission (intake_admission.go), and the item posted to its location's mailbox
// (mailbox.go). It holds no gateway: its collaborators are
// injected (wireIntake).
type intake struct {
	log      *slog.Logger
	metrics  *Metrics
	tracer   *otlp.Tracer // nil: no traces
	access   *access.Checker
	dedupe   Dedupe
	budget   Budget
	inbox    Inbox
	commands *commands
	mail     *mailboxes
	// threads opens the reply threads of channel messages and knows
	// which threads are bound (intake_threads.go).
	threads *threads
	// reply answers in in's conversation; respond answers in, through its
	// interaction if it has one; moved handles a platform's "conversation
	// moved" event; route hands a message to its owner (with the
	// mailbox item's offer of its goroutine, if any); refused reports
	// an inbox that refused an event (health.go); runContext is the parent
	// of the mailboxes' work.
	reply      func(ctx context.Context, in chat.Inbound, md string)
	respond    func(ctx context.Context, in chat.Inbound, md string, private bool)
	moved      func(ctx context.Context, in chat.Inbound)
	route      func(ctx context.Context, p *pending, take takeOver)
	refused    func(ctx context.Context, in chat.Inbound, err error)
	runContext func() context.Context
	// ext expands messages and runs the input hooks (nil: none); extFor,
	// when set, gives the extensions of a message's agent instead.
	ext    Extensions
	extFor func(ctx context.Context, in chat.Inbound) Extensions
	// accepted hands an item the local admission enqueued on (nil: post
	// it here; cluster mode: the pump of the session's holder takes it).
	accepted func(ref inboxRef, item inboxItem)
	// shared is set in cluster mode: a failing dedupe or inbox is the
	// shared store (Redis) down, not the disk (cluster_degraded.go).
	shared *degraded
	// outage counts the failures of the shared store (cluster mode; nil
	// otherwise), which it logs as an outage (cluster_outage.go).
	outage *outage
	// admit is set in cluster mode when the dedupe admits in one round
	// trip (cluster_admit.go): the intake's admission is then the shared one
	// (intake_admission.go), which enqueues in place of the inbox and hands
	// what it enqueued on in place of accepted.
	admit func(ctx context.Context, ad cluster.Admission, item inboxItem) (cluster.Admitted, error)
	// forgets retries a refused event's Forget that failed (cluster mode;
	// nil: not retried).
	forgets *forgetRetries
	// ackLater queues a failed acknowledgement for a retry (cluster mode:
	// cluster_ackretry.go); false when it is not queued.
	ackLater func(ref inboxRef) bool
	// dropStale lets an item go that this replica gave up since it was
	// handed (cluster mode: pump.dropStale; nil: none is).
	dropStale func(ctx context.Context, refs ...inboxRef) bool
}

// wireIntake builds the intake of g.
func wireIntake(g *Gateway) *intake {
	return &intake{
		log:      g.log,
		metrics:  g.metrics,
		tracer:   g.cfg.Tracer,
		access:   g.access,
		dedupe:   g.dedupe,
		budget:   g.budget,
		inbox:    g.inbox,
		commands: g.commands,
		mail:     g.mail,
		threads:  g.threads,
		reply:    g.replier.reply,
		respond:  g.replier.respond,
		moved:    g.moved,
		route:    g.route,
		refused: func(ctx context.Context, in chat.Inbound, err error) {
			g.health.storageFailed(nil, err)
			g.health.storageDown(ctx, in)
		},
		runContext: g.runContext,
		ext:        g.cfg.Extensions,
		extFor:     g.extensionsFor,
	}
}

// sink is the chat.Sink of every adapter, in three steps: screen (a moved
// conversation, the bound flag, access, and, unless the admission takes
// them in its one round trip, the dedupe and the sender's budget), then
// classify (a button press, a command, a message), then admit (the
// admission seam, intake_admission.go).
func (i *intake) sink(ctx context.Context, in chat.Inbound) error {
	i.metrics.inbound(in.Conv.Platform)
	ctx, span := i.tracer.Start(ctx, "pibot.intake")
	defer span.End()
	span.Set("pibot.conv", in.Conv.Key())
	if pass, err := i.screen(ctx, &in, span); !pass {
		return err
	}
	adm := i.admission()
	if adm.oneTrip() {
		// An item known as it came is admitted in one round trip
		// (cluster_admit.go).
		if item, ok := i.direct(in, span.Traceparent()); ok {
			return i.admitDirect(ctx, adm, in, item, span)
		}
	}
	// The dedupe and the budget come before classify, which may act (open
	// a thread, answer a command): a redelivery must not act twice.
	if pass, err := i.unseen(ctx, in, span); !pass {
		return err
	}
	in, item, done := i.classify(ctx, in, span.Traceparent())
	if done {
		i.commit(ctx, in.DedupKey)
		return nil
	}
	return i.enqueue(ctx, adm, in, item, span)
}

// screen decides whether in goes on: a platform's "conversation moved"
// event is handled here, and the sender's access is checked (in a thread
// the bot takes part in, no mention is needed: in is marked bound). A
// refusal the platform must redeliver is returned as an error.
func (i *intake) screen(ctx context.Context, in *chat.Inbound, span *otlp.Span) (bool, error) {
	if in.Kind == chat.KindMoved {
		// A platform event, judged by the group it moves, not by a sender.
		i.moved(ctx, *in)
		return false, nil
	}
	i.threads.markBound(ctx, in)
	d := i.access.Check(ctx, *in)
	if d.Err != nil && i.shared != nil {
		// Cluster mode: the shared pairing store (Redis) is down. Refused,
		// so the platform delivers it again, but no notice: the sender
		// may be a stranger, or a group member who did not call the bot.
		i.outage.report(i.log, "access check failed; event refused", d.Err)
		span.Fail(d.Err)
		return false, fmt.Errorf("gateway: access: %w: %w", chat.ErrUnavailable, d.Err)
	}
	if d.Err != nil {
		// Not let in on a store that cannot say; the next message asks again.
		i.log.Error("access check failed; event ignored", "conv", in.Conv.Key(), "user", in.User.ID, "err", d.Err)
	}
	switch d.Verdict {
	case access.Ignore:
		// Nothing is said, but a platform spinner still ends.
		i.respond(ctx, *in, "", false)
		return false, nil
	case access.Pair, access.Deny:
		i.respond(ctx, *in, d.Reply, true)
		return false, nil
	}
	return true, nil
}

// unseen drops a duplicate of an event seen before and an event over its
// sender's budget (messages and commands, not presses), asking both in
// one round trip when the dedupe can (cluster.SeenReserver).
func (i *intake) unseen(ctx context.Context, in chat.Inbound, span *otlp.Span) (bool, error) {
	var budgetWait *time.Duration // the sender's budget, when asked with the dedupe
	if in.DedupKey != "" {
		dup, err := i.seen(ctx, in, &budgetWait)
		if (dup || errors.Is(err, cluster.ErrInFlight)) && i.forgets.take(in.DedupKey) {
			// A refusal of this replica could not forget the key yet
			// (forgetRetries): this is its redelivery, not a duplicate.
			if err = i.forget(ctx, in.DedupKey); err == nil {
				dup, err = i.seen(ctx, in, &budgetWait)
			}
		}
		if errors.Is(err, cluster.ErrInFlight) {
			return false, i.inFlight(in, span, err)
		}
		if err != nil {
			// Refused: the platform delivers it again (cluster mode: the
			// sender is told why, once in a while). The key may be
			// recorded all the same (an answer lost after the script
			// ran): forgotten, or the redelivery would be a duplicate.
			i.outage.report(i.log, "dedupe: event refused", err)
			_ = i.forget(ctx, in.DedupKey)
			i.shared.sharedDown(ctx, in)
			span.Fail(err)
			return false, fmt.Errorf("gateway: dedupe: %w: %w", chat.ErrUnavailable, err)
		}
		if dup {
			i.log.Debug("duplicate event dropped", "key", in.DedupKey)
			return false, nil
		}
		crashpoint.Hit(crashpoint.DedupeSeen)
	}
	if !i.withinBudget(ctx, in, budgetWait) {
		// Answered (a notice), not taken: its key stays, as a taken one's.
		i.commit(ctx, in.DedupKey)
		return false, nil
	}
	return true, nil
}

// classify decides the inbox item of in: a button press, a command that
// acts on a session, or a message (a command answered without a session
// is answered here, done). A channel message that wants a thread has it
// opened first: in is returned as moved there.
func (i *intake) classify(ctx context.Context, in chat.Inbound, trace string) (chat.Inbound, inboxItem, bool) {
	if i.threads.wantsThread(in) {
		// After the access check: an ignored message opens nothing.
		moved, err := i.threads.open(ctx, in)
		if err != nil {
			// Answered on the main line instead: the message is not lost.
			i.log.Warn("open a thread; answering on the channel's main line", "conv", in.Conv.Key(), "err", err)
			i.reply(ctx, in, "⚠️ I could not open a thread for this message, so I answer here instead.")
		}
		in = moved
	}
	item := inboxItem{In: in, Trace: trace}
	switch {
	case in.Kind == chat.KindAction && in.Action != nil:
		item.Kind = itemPress
	case in.Command != nil && i.commands.needsSession(in.Command.Name):
		item.Kind = itemCommand
	case in.Command != nil:
		if i.answerAtIntake(ctx, in, &item) {
			return in, item, true
		}
	}
	empty := item.Kind == itemMessage && item.In.Text == "" && len(item.In.Files) == 0
	return in, item, empty
}

// answerAtIntake dispatches in, a command that needs no session (/help,
// /whoami, an unknown command, and the usage and rights answers of /steer
// and /followup), and reports whether it was answered. Otherwise it is a
// message to a run (/steer, /followup, a prompt template): item becomes
// it.
func (i *intake) answerAtIntake(ctx context.Context, in chat.Inbound, item *inboxItem) bool {
	// Behind commands still waiting at its location, it waits its turn
	// there, so replies come in the order sent.
	if key := in.Conv.Key(); i.commands.answeredAtIntake(in.Command.Name) && i.mail.busy(key) {
		at := in // a copy of its own for the closure: in stays on the stack
		if i.mail.post(key, func() { i.commands.dispatch(i.runContext(), at, false) }) {
			return true
		}
	}
	mode, handled := i.commands.dispatch(ctx, in, false)
	if handled {
		return true
	}
	// Its interaction is answered (dispatch): the run replies.
	item.Mode = mode
	item.In.Text = in.Command.Args
	if mode == "" { // a prompt template: expanded before the run
		item.In.Text = messageText(in.Command)
	}
	item.In.Command = nil
	item.In.Interaction = nil
	return false
}

// enqueue admits item, the event in as classify decided it, whose dedupe
// and budget unseen asked already. A command or press the inbox refuses
// is executed anyway; a refused message is refused to the platform.
func (i *intake) enqueue(ctx context.Context, adm admission, in chat.Inbound, item inboxItem, span *otlp.Span) error {
	data, err := json.Marshal(item)
	if err != nil {
		return fmt.Errorf("gateway: encode inbound: %w", err)
	}
	key := in.Conv.Key()
	// Shared: enqueued, and taken at once if this replica holds the
	// session.
	res, err := adm.admit(ctx, cluster.Admission{Key: key, Data: data, Seen: in.DedupKey}, item)
	if err == nil && res.ID != "" {
		crashpoint.Hit(crashpoint.InboxAppend)
	}
	if err != nil && item.Kind != itemMessage {
		// A command or press works without the inbox, as it always did
		// (/stop on a full disk): it is only not replayed after a crash.
		i.log.Warn("inbox: a command or button press is not durable; executed anyway", "conv", in.Conv.Key(), "err", err)
		if res.ID == "" {
			i.post(inboxRef{}, item, false)
		}
		return nil
	}
	if err != nil {
		return i.refuse(ctx, in, res.ID, err, span)
	}
	return nil
}

// refuse answers a message the inbox refused (err; id, when it was
// enqueued all the same, is acknowledged): not acknowledged to the
// platform, which sends it again, and a copy that already reached its
// session is recognised there. (A shared dedupe keeps a key whose item
// the admission enqueued before its answer was lost: the redelivery is a
// duplicate.)
func (i *intake) refuse(ctx context.Context, in chat.Inbound, id string, err error, span *otlp.Span) error {
	_ = i.forget(ctx, in.DedupKey)
	if i.shared != nil {
		i.outage.report(i.log, "inbox: event refused", err)
		i.shared.sharedDown(ctx, in) // Redis, not the disk
	} else {
		i.refused(ctx, in, err) // health.go: degraded until a probe succeeds; the sender is told
	}
	if id != "" {
		// Not taken: the redelivery is. (On a failing disk this ack may
		// fail too; the copy then replays at the next start and its
		// session recognises it.)
		if aerr := i.inbox.Ack(ctx, in.Conv.Key(), id); aerr != nil {
			i.log.Warn("inbox: ack a refused message", "id", id, "err", aerr)
		}
	}
	span.Fail(err)
	return fmt.Errorf("gateway: inbox: %w: %w", chat.ErrUnavailable, err)
}

// seen asks the dedupe about in's key (unseen), with its sender's budget
// in one round trip when the dedupe can (cluster.SeenReserver): then
// *budgetWait is set to the budget's answer.
func (i *intake) seen(ctx context.Context, in chat.Inbound, budgetWait **time.Duration) (bool, error) {
	if a, ok := i.dedupe.(cluster.SeenReserver); ok && i.budgeted(in) {
		dup, wait, err := a.SeenReserve(ctx, in.DedupKey, budgetKey(in))
		*budgetWait = &wait
		return dup, err
	}
	return i.dedupe.Seen(ctx, in.DedupKey)
}

// forget lets key ("": none), the dedupe key of a refused event, be seen
// again, so the platform's redelivery is taken: the dedupe may have
// recorded it (Seen, or an admission, whose outcome the refusal does not
// know). A key whose item an admission enqueued stays (Dedupe's
// contract). It is asked even when ctx ended (a deadline is the usual
// refusal); a Forget that fails is retried until Redis answers
// (forgetRetries, cluster mode), or the redelivery may be dropped as a
// duplicate. It returns Forget's error.
func (i *intake) forget(ctx context.Context, key string) error {
	if key == "" {
		return nil
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), forgetTimeout)
	err := i.dedupe.Forget(fctx, key)
	cancel()
	if err == nil {
		return nil
	}
	i.outage.report(i.log, "dedupe: forget a refused event", err)
	if !i.forgets.add(key) {
		i.log.Warn("dedupe: a refused event's key is not forgotten; its redelivery may be dropped as a duplicate", "key", key)
	}
	return err
}

// budgeted reports whether in is subject to the per-sender budget.
func (i *intake) budgeted(in chat.Inbound) bool {
	return i.budget != nil && in.Kind == chat.KindMessage && !i.access.IsOwner(in.Conv.Platform, in.User.ID)
}

// budgetKey is the sender budget's key of in.
func budgetKey(in chat.Inbound) string { return string(in.Conv.Platform) + ":" + in.User.ID }

// withinBudget applies the per-sender message budget; asked is its
// answer when the dedupe asked it already (nil: not asked). A sender over
// it is told once per cool-down that the message was not processed.
func (i *intake) withinBudget(ctx context.Context, in chat.Inbound, asked *time.Duration) bool {
	if !i.budgeted(in) {
		return true
	}
	key := budgetKey(in)
	var wait time.Duration
	if asked != nil {
		wait = *asked
	} else {
		var err error
		if wait, err = i.budget.Reserve(ctx, key); err != nil {
			// A budget that cannot be asked does not stop messages.
			i.log.Warn("sender budget unavailable; message let through", "err", err)
			return true
		}
	}
	if wait <= 0 {
		return true
	}
	i.metrics.overBudget()
	notice, err := i.budget.Reserve(ctx, key+":notice")
	md := ""
	switch {
	case err != nil:
		i.log.Warn("sender budget unavailable; over-budget notice not sent", "err", err)
	case notice <= 0:
		md = fmt.Sprintf("⏳ You are sending messages faster than I can take them; this one was not processed. Try again in %s.", wait.Round(time.Second))
	}
	// Without a notice, a command's interaction is still answered.
	i.respond(ctx, in, md, true)
	return false
}

// post hands an inbox item to the mailbox of its location, where it is
// executed after everything that came before it there. replay marks an
// item taken from the inbox at start.
func (i *intake) post(ref inboxRef, item inboxItem, replay bool) {
	i.mail.postTakeOver(item.In.Conv.Key(), func(take takeOver) {
		i.execute(i.runContext(), ref, item, replay, take)
	})
}

// execute does the work of one inbox item; it runs in the mailbox of the
// item's location. take is the item's offer of its goroutine: a message
// whose run starts at once runs on it (runStarter.launch); commands and
// presses do not take it.
func (i *intake) execute(ctx context.Context, ref inboxRef, item inboxItem, replay bool, take takeOver) {
	if i.dropStale != nil && i.dropStale(ctx, ref) {
		return // the inbox hands it over again (cluster_given.go)
	}
	switch item.Kind {
	case itemMessage:
		ext := i.ext
		if i.extFor != nil {
			ext = i.extFor(ctx, item.In)
		}
		switch applyInput(ctx, ext, i.log, &item, func(md string) { i.reply(ctx, item.In, md) }) {
		case inputRun:
			i.route(ctx, &pending{item: item, inbox: ref}, take)
			return
		case inputLater: // stopping: replayed at the next start
			return
		}
	case itemCommand:
		i.begin(ctx, ref)
		i.commands.dispatch(ctx, item.In, replay)
	case itemPress:
		i.begin(ctx, ref)
		i.commands.press(ctx, item.In)
	default:
		i.log.Error("inbox item of an unknown kind dropped", "kind", item.Kind, "conv", item.In.Conv.Key())
	}
	// A command's or press's changes to the session are flushed by the
	// time it returns (they are appended with SyncAlways).
	if ref.id != "" {
		if err := i.inbox.Ack(ctx, ref.key, ref.id); err != nil {
			if i.ackLater != nil && i.ackLater(ref) {
				i.log.Warn("inbox ack; trying again", "key", ref.key, "id", ref.id, "err", err)
				return
			}
			i.log.Warn("inbox ack", "err", err)
		}
	}
}

// begin tells the inbox that the work of ref, a command or press whose
// handler starts now, executes: a crash from here counts against it.
func (i *intake) begin(ctx context.Context, ref inboxRef) {
	if !ref.begun {
		beginRefs(ctx, i.inbox, i.log, []inboxRef{ref})
	}
}
