package gateway

import (
	"context"
	"sync"
)

// workGroup owns the gateway's goroutines of work (runs, mailbox items
// whose goroutine a run takes over, retried edits, owners closed off a
// caller's locks): their parent context, which Run sets and shutdown
// cancels, and the count shutdown waits for (Gateway.drain).
type workGroup struct {
	mu  sync.Mutex
	ctx context.Context // set by Run (start): parent of every agent run
	wg  sync.WaitGroup
}

// start makes ctx the parent of the work from now on.
func (w *workGroup) start(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ctx = ctx
}

// context is the parent of the gateway's work (runs, mailboxes): it ends
// when shutdown cancels the runs.
func (w *workGroup) context() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil {
		return context.Background()
	}
	return w.ctx
}

// track runs f on a goroutine the gateway owns: shutdown waits for it, and
// its context ends when the gateway's runs are cancelled.
func (w *workGroup) track(f func(ctx context.Context)) {
	ctx := w.context()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f(ctx)
	}()
}

// trackHere is runStarter.trackHere: a run taking its mailbox item's
// goroutine over. The gateway counts f before take lets the mailbox's
// count go, so a drain (mailboxes, then runs) never misses it.
func (w *workGroup) trackHere(take takeOver, f func(ctx context.Context)) bool {
	w.wg.Add(1)
	defer w.wg.Done()
	if !take() {
		return false
	}
	f(w.context())
	return true
}

// wait waits for every goroutine tracked.
func (w *workGroup) wait() { w.wg.Wait() }
