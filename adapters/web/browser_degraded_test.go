package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/pibot/pibot/adapters/web"
	"github.com/pibot/pibot/chat"
)

// refusingGateway refuses every message as the gateway does while the
// shared store (Redis) does not answer, until up; it takes each message
// id once (a copy sent again is a duplicate, as the gateway's dedupe
// makes it).
type refusingGateway struct {
	mu    sync.Mutex
	up    bool
	tries []string        // the dedupe key of every message fed
	taken map[string]bool // dedupe key -> taken
}

func (g *refusingGateway) sink(_ context.Context, in chat.Inbound) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tries = append(g.tries, in.DedupKey)
	if !g.up {
		return fmt.Errorf("gateway: admit: %w: %w", chat.ErrUnavailable,
			errors.New("rediscluster: admit: dial tcp 127.0.0.1:6390: connect: connection refused"))
	}
	g.taken[in.DedupKey] = true
	return nil
}

// TestBrowserStorageDown: while the gateway's store is down the page's
// header says "connected · storage unavailable, retrying", a message
// sent shows in words why it was not delivered (no error text) with a
// Retry button; once the store is back the header clears, and Retry
// sends the same message under the same id, which is then taken once.
func TestBrowserStorageDown(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	execPath := chromium(t)
	a, err := web.New(web.Config{})
	if err != nil {
		t.Fatal(err)
	}
	g := &refusingGateway{taken: map[string]bool{}}
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- a.Run(runCtx, g.sink) }()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		stopRun()
		<-runDone
		srv.Close()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(execPath), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Headless, chromedp.WindowSize(1000, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	eval := func(js string) string {
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return s
	}
	waitFor := func(what, js string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := eval(js)
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %q; page: %q", what, s, eval("document.body.innerText"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	const header = `document.getElementById("conn").textContent + "|" + document.getElementById("conn").className`
	const errorLine = `(document.querySelector("#messages .error") || {}).innerText || ""`

	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#conn.ok"))); err != nil {
		t.Fatal(err)
	}
	a.ShowHealth("storage unavailable, retrying") // the gateway: Redis down
	waitFor("the degraded header", header, func(s string) bool {
		return s == "connected · storage unavailable, retrying|conn degraded"
	})
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS("#input"), "hello while down"+kb.Enter)); err != nil {
		t.Fatal(err)
	}
	shown := waitFor("the refusal beside the message", errorLine, func(s string) bool { return strings.Contains(s, "Retry") })
	if !strings.HasPrefix(shown, "Not delivered: pibot's storage is unavailable right now") {
		t.Errorf("the message shows %q", shown)
	}
	for _, internal := range []string{"gateway", "rediscluster", "dial tcp", "6390"} {
		if strings.Contains(eval("document.body.innerText"), internal) {
			t.Errorf("the page shows internal error text %q: %q", internal, eval("document.body.innerText"))
		}
	}

	g.mu.Lock()
	g.up = true
	g.mu.Unlock()
	a.ShowHealth("") // Redis back
	waitFor("the header cleared", header, func(s string) bool { return s == "connected|conn ok" })
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#messages .error button"))); err != nil {
		t.Fatal(err)
	}
	waitFor("the error to go", errorLine, func(s string) bool { return s == "" })
	// The page reloads: the message is there, delivered, once.
	if err := chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#conn.ok"))); err != nil {
		t.Fatal(err)
	}
	waitFor("the message after a reload", `document.getElementById("messages").innerText`, func(s string) bool {
		return strings.Count(s, "hello while down") == 1 && !strings.Contains(s, "Not delivered")
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.tries) != 2 || g.tries[0] != g.tries[1] || len(g.taken) != 1 {
		t.Errorf("fed %q, taken %v: want the message twice under one id, taken once", g.tries, g.taken)
	}
}
