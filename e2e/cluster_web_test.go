package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The web chat in cluster mode: two real replicas with the web chat on,
// a browser (an SSE client) on one of them, the conversation's session
// held by the other.

// webEvent is an event of the web chat's stream (/api/events).
type webEvent struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	From string `json:"from"`
	Text string `json:"text"`
}

// webStream is an open /api/events stream; its reader goroutine ends
// when the test does (the request's context closes the body).
type webStream struct {
	evs  chan webEvent
	done chan struct{}
}

// openWebStream opens replica p's event stream of conversation conv and
// reads it up to its "ready" marker.
func openWebStream(t *testing.T, p *crashPibot, conv string) *webStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/events?conv="+conv, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		resp.Body.Close()
		t.Fatalf("events on %s: %s", p.base, resp.Status)
	}
	s := &webStream{evs: make(chan webEvent, 1024), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(s.evs)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			data, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: ")
			var ev webEvent
			if ok && json.Unmarshal([]byte(data), &ev) == nil {
				s.evs <- ev
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-s.done
	})
	s.until(t, "the ready marker", func(ev webEvent) bool { return ev.Type == "ready" })
	return s
}

// until returns the first event ok accepts, skipping the others, within
// 60 seconds.
func (s *webStream) until(t *testing.T, what string, ok func(webEvent) bool) webEvent {
	t.Helper()
	timeout := time.After(60 * time.Second)
	var seen []webEvent
	for {
		select {
		case ev, open := <-s.evs:
			if !open {
				t.Fatalf("stream ended before %s; saw %+v", what, seen)
			}
			if ok(ev) {
				return ev
			}
			seen = append(seen, ev)
		case <-timeout:
			t.Fatalf("no %s within 60s; saw %+v", what, seen)
		}
	}
}

// webSend posts a message to replica p's web chat, as the page does.
func webSend(t *testing.T, p *crashPibot, conv, id, text string) {
	t.Helper()
	body := fmt.Sprintf(`{"conv":%q,"id":%q,"text":%q}`, conv, id, text)
	resp, err := http.Post(p.base+"/api/send", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("send to %s: %s %s", p.base, resp.Status, b)
	}
}

// webHistory returns the texts of conversation conv as replica p rebuilds
// it from the session (/api/history), one "from: text" per message.
func webHistory(t *testing.T, p *crashPibot, conv string) []string {
	t.Helper()
	resp, err := http.Get(p.base + "/api/history?conv=" + conv)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Messages []webEvent `json:"messages"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("history on %s: %s", p.base, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range h.Messages {
		out = append(out, m.From+": "+strings.TrimSpace(m.Text))
	}
	return out
}

// waitWebSubscribers waits until n replicas' web chats listen on the
// topic their events travel on.
func (w *clusterWorld) waitWebSubscribers(n int64) {
	w.t.Helper()
	ch := w.prefix + "web:events"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := w.rdb.PubSubNumSub(w.t.Context(), ch).Result()
		if err == nil && got[ch] >= n {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%d web chats subscribed to %s after 30s, want %d", got[ch], ch, n)
		}
	}
}

// TestClusterWebChatAcrossReplicas: a browser on the replica that does
// not hold the conversation's session sends a message; the holder runs it
// and the browser sees the reply stream live; a reload on either replica
// rebuilds the conversation; a browser of another conversation sees
// nothing of it.
func TestClusterWebChatAcrossReplicas(t *testing.T) {
	w := newClusterWorld(t)
	// A lease that outlives a loaded machine's stalls: the holder must
	// not change during the test.
	w.leaseMs = 10000
	ab := w.replicas(2, replicaOpts{web: true})
	a, b := ab[0], ab[1]
	w.logOnFailure(a, b)
	w.waitWebSubscribers(2)

	// A first message makes the session and its holder.
	onA := openWebStream(t, a, "wc1")
	webSend(t, a, "wc1", "m0", "warm up")
	onA.until(t, "the first reply", func(ev webEvent) bool {
		return ev.Type == "msg" && ev.From == "bot" && strings.Contains(ev.Text, "You said: warm up")
	})
	path := w.sessionFile()
	var owner, other *crashPibot
	switch w.waitHolder(path, func(h string) bool { return h == replicaID(a) || h == replicaID(b) }) {
	case replicaID(a):
		owner, other = a, b
	default:
		owner, other = b, a
	}
	ranBefore := other.metrics()["pibot_runs_total"]

	// The browser is on the other replica.
	onOther := openWebStream(t, other, "wc1")
	otherConv := openWebStream(t, other, "wc2")
	webSend(t, other, "wc1", "m1", "across replicas")
	onOther.until(t, "the user's message", func(ev webEvent) bool { return ev.ID == "u-m1" })
	reply := onOther.until(t, "the owner's reply", func(ev webEvent) bool {
		return ev.Type == "msg" && ev.From == "bot" && strings.Contains(ev.Text, "You said: across replicas")
	})
	// It streams: the reply's final edit comes after its creation.
	onOther.until(t, "the reply's final text", func(ev webEvent) bool {
		return ev.ID == reply.ID && strings.Contains(ev.Text, "canned answer")
	})
	if ran := other.metrics()["pibot_runs_total"]; ran != ranBefore {
		t.Fatalf("the browser's replica ran the message itself (runs %v, then %v): the test needs the owner to", ranBefore, ran)
	}
	if h := w.holder(path); h != replicaID(owner) {
		t.Fatalf("lease of %s held by %q, want the owner %q", path, h, replicaID(owner))
	}

	// A reload, on either replica, rebuilds the conversation.
	for _, p := range []*crashPibot{other, owner} {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			h := webHistory(t, p, "wc1")
			if len(h) == 4 && h[2] == "user: across replicas" && strings.Contains(h[3], "You said: across replicas") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("history on %s: %q", p.base, h)
			}
		}
	}

	// The other conversation's browser saw nothing of wc1: its first
	// event is its own message.
	webSend(t, other, "wc2", "n1", "another conversation")
	if ev := otherConv.until(t, "an event", func(webEvent) bool { return true }); ev.ID != "u-n1" {
		t.Fatalf("wc2's browser got %+v first", ev)
	}
	a.stop()
	b.stop()
}

// clusterChromium returns the path of a Chromium binary, skipping the
// test when there is none.
func clusterChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium binary found (apt-get install -y chromium)")
	return ""
}

// tabWait polls js in tab until it yields a string containing sub.
func tabWait(t *testing.T, tab context.Context, what, js, sub string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, err := chromedp.Run(tab, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if strings.Contains(s, sub) {
			return
		}
		last = s
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 60s; page shows %q", what, last)
		}
	}
}

// TestClusterWebChatInBrowser: two tabs of headless Chromium, one on
// each replica, show one conversation. Whichever replica holds its
// session, both tabs show every message and reply live, whichever tab
// sent it; a reload rebuilds the conversation from the session.
func TestClusterWebChatInBrowser(t *testing.T) {
	execPath := clusterChromium(t)
	w := newClusterWorld(t)
	ab := w.replicas(2, replicaOpts{web: true})
	a, b := ab[0], ab[1]
	w.logOnFailure(a, b)
	w.waitWebSubscribers(2)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(execPath),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless, chromedp.WindowSize(1000, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	tabA, cancelA := chromedp.NewContext(actx)
	defer cancelA()
	const jsConnected = `document.querySelector('#conn.ok') ? "ok" : ""`
	if _, err := chromedp.Run(tabA, chromedp.Navigate(a.base+"/")); err != nil {
		t.Fatal(err)
	}
	tabWait(t, tabA, "connection on A", jsConnected, "ok")
	conv, err := chromedp.Run(tabA, chromedp.Evaluate[string](`localStorage.getItem("pibot.conv") || ""`))
	if err != nil || conv == "" {
		t.Fatalf("conversation id %q: %v", conv, err)
	}
	// The second tab opens the same conversation on replica B.
	tabB, cancelB := chromedp.NewContext(tabA)
	defer cancelB()
	if _, err := chromedp.Run(tabB, chromedp.Navigate(b.base+"/")); err != nil {
		t.Fatal(err)
	}
	tabWait(t, tabB, "connection on B", jsConnected, "ok")
	if _, err := chromedp.Run(tabB, chromedp.Evaluate[string](`localStorage.setItem("pibot.conv", `+strconv.Quote(conv)+`), ""`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tabB, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	tabWait(t, tabB, "connection on B", jsConnected, "ok")

	const jsBodies = `Array.from(document.querySelectorAll('.msg .body')).map(b => b.textContent).join("\n")`
	for i, from := range []context.Context{tabA, tabB, tabA} {
		text := fmt.Sprintf("message %d from tab %c", i, "ABA"[i])
		if err := chromedp.Do(from, chromedp.SendKeys(chromedp.CSS("#input"), text+kb.Enter)); err != nil {
			t.Fatal(err)
		}
		for name, tab := range map[string]context.Context{"A": tabA, "B": tabB} {
			tabWait(t, tab, "the reply to "+text+" in tab "+name, jsBodies, "You said: "+text)
		}
	}
	// A reload on either replica shows the whole conversation.
	if err := chromedp.Do(tabB, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	tabWait(t, tabB, "the rebuilt conversation", jsBodies, "You said: message 2 from tab A")
	tabWait(t, tabB, "the rebuilt conversation", jsBodies, "message 0 from tab A")
	a.stop()
	b.stop()
}
