package web_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/pibot/pibot/adapters/web"
)

// TestBrowserEmptyState: a conversation without messages says how to
// start and, when pibot has no model (Config.Notice), what to configure,
// rendered as markdown; the hint goes once there are messages and comes
// back in a new conversation. Without a notice only the hint shows.
func TestBrowserEmptyState(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	execPath := chromium(t)
	const notice = "**No model is configured.** Set `OPENAI_API_KEY` and restart pibot."
	for _, tt := range []struct {
		name, notice string
	}{{"no model", notice}, {"a model", ""}} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := web.New(web.Config{Notice: tt.notice})
			if err != nil {
				t.Fatal(err)
			}
			gctx, stopGateway := context.WithCancel(context.Background())
			g := &gateway{a: a}
			runCtx, stopRun := context.WithCancel(context.Background())
			runDone := make(chan error, 1)
			go func() { runDone <- a.Run(runCtx, g.sink(gctx)) }()
			srv := httptest.NewServer(a.Handler())
			t.Cleanup(func() {
				stopGateway()
				g.wg.Wait()
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
			// state is what the empty state shows: "" when hidden.
			state := `document.getElementById("empty").hidden ? "" : document.getElementById("empty").innerText`
			waitFor := func(what string, ok func(string) bool) string {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for {
					s := eval(state)
					if ok(s) {
						return s
					}
					if time.Now().After(deadline) {
						t.Fatalf("waiting for %s; the empty state shows %q; page: %q", what, s, eval("document.body.innerText"))
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#conn.ok"))); err != nil {
				t.Fatal(err)
			}
			shown := waitFor("the hint", func(s string) bool {
				return strings.Contains(s, "Send a message to start") && (tt.notice == "" || strings.Contains(s, "No model is configured"))
			})
			if tt.notice == "" && strings.Contains(shown, "model is configured") {
				t.Errorf("a notice without one: %q", shown)
			}
			if tt.notice != "" {
				if got := eval(`(document.querySelector("#notice strong") || {}).textContent || ""`); got != "No model is configured." {
					t.Errorf("the notice's markdown is not rendered: strong %q", got)
				}
			}
			if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS("#input"), "hello"+kb.Enter)); err != nil {
				t.Fatal(err)
			}
			waitFor("the hint to go", func(s string) bool { return s == "" })
			if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#newconv"))); err != nil {
				t.Fatal(err)
			}
			waitFor("the hint in a new conversation", func(s string) bool { return strings.Contains(s, "Send a message to start") })
		})
	}
}
