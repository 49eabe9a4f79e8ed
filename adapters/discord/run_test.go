package discord

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/discord/discordtest"
	"github.com/pibot/pibot/chat"
)

// A process that restarts within minutes resumes the saved session
// instead of identifying; the events it had not handled are replayed.
func TestRestartResumes(t *testing.T) {
	state := filepath.Join(t.TempDir(), "discord-gateway.json")
	h := newHarness(t, func(c *Config) { c.StatePath = state })
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan chat.Inbound, 8)
	done := make(chan error, 1)
	go func() {
		done <- h.a.Run(ctx, func(_ context.Context, in chat.Inbound) error { got <- in; return nil })
	}()
	<-h.srv.Ready()
	m := h.srv.PostUser(dmID, alice, "before the restart", "")
	h.srv.DispatchMessage(m, false)
	next(t, got)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.srv.Drop()
	missed := h.srv.PostUser(dmID, alice, "while restarting", "")
	h.srv.DispatchMessage(missed, false)

	h.a = h.adapter(t, func(c *Config) { c.StatePath = state })
	got2 := h.run(t)
	if in := next(t, got2); in.Text != "while restarting" {
		t.Fatalf("after the restart: %+v", in)
	}
	if r, i := h.srv.Resumes(), h.srv.Identifies(); r != 1 || i != 1 {
		t.Errorf("resumes %d, identifies %d; want 1 and 1", r, i)
	}
}

// A crash loop (processes that identify and die at once) still spaces
// its identifies out: the back-off counts the identifies saved by earlier
// processes.
func TestCrashLoopSpacesIdentifies(t *testing.T) {
	state := filepath.Join(t.TempDir(), "discord-gateway.json")
	h := newHarness(t, nil)
	for range 3 {
		a := h.adapter(t, func(c *Config) { c.StatePath = state; c.IdentifyBackoff = 300 * time.Millisecond })
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		n := h.srv.Identifies()
		go func() { done <- a.Run(ctx, func(context.Context, chat.Inbound) error { return nil }) }()
		waitFor(t, func() bool { return h.srv.Identifies() > n })
		h.srv.InvalidateSession() // the session dies with the "crash"
		cancel()
		<-done
	}
	at := h.srv.IdentifyTimes()
	if len(at) != 3 {
		t.Fatalf("%d identifies", len(at))
	}
	// The fake stamps an identify when it reads it: the earlier one may
	// have spent longer on its way than the later (under load, a few
	// milliseconds), so the gap seen there may fall short of the
	// adapter's wait by that much.
	const transit = 25 * time.Millisecond
	for i := 1; i < len(at); i++ {
		if gap, want := at[i].Sub(at[i-1]), 300*time.Millisecond<<(i-1); gap < want-transit {
			t.Errorf("identify %d came %s after the previous one, want at least %s", i, gap, want)
		}
	}
}

// A sink slower than 2 s does not make Discord fail the interaction: it
// is acknowledged in time, and a failure after that is told to the user
// alone.
func TestSlowSinkStillAcknowledged(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- h.a.Run(ctx, func(ctx context.Context, in chat.Inbound) error {
			time.Sleep(2500 * time.Millisecond)
			return errors.New("disk full")
		})
	}()
	defer func() { cancel(); <-done }()
	<-h.srv.Ready()
	h.srv.Command(chanID, alice, "pi", discordtest.Option{Name: "stop", Type: 1})
	waitFor(t, func() bool { return len(h.srv.Callbacks()) == 1 })
	if cb := h.srv.Callbacks()[0]; cb.Type != discordtest.CallbackDeferred {
		t.Fatalf("callback type %d", cb.Type)
	}
	waitFor(t, func() bool { return strings.Contains(h.srv.Transcript(chanID, alice.ID), "could not take this") })
	if strings.Contains(h.srv.Transcript(chanID, bob.ID), "could not take this") {
		t.Error("others see the failure notice")
	}
}

// A command of another name (an old registration) is answered, only to
// its user, instead of failing.
func TestForeignCommandAnswered(t *testing.T) {
	h := newHarness(t, nil)
	got := h.run(t)
	h.srv.Command(chanID, alice, "oldname", discordtest.Option{Name: "stop", Type: 1})
	waitFor(t, func() bool { return strings.Contains(h.srv.Transcript(chanID, alice.ID), "not pibot's") })
	if strings.Contains(h.srv.Transcript(chanID, bob.ID), "not pibot's") {
		t.Error("others see the notice")
	}
	nothing(t, got, 200*time.Millisecond)
}

// A connection whose heartbeats go unanswered, and a request to
// reconnect (op 7), both end in a RESUME, not an IDENTIFY.
func TestZombieAndReconnectResume(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.SetHeartbeat(150 * time.Millisecond)
	got := h.run(t)
	h.srv.StopAcks()
	waitFor(t, func() bool { return h.srv.Resumes() >= 1 })
	h.srv.ResumeAcks()
	<-h.srv.Ready()
	n := h.srv.Resumes()
	h.srv.RequestReconnect()
	waitFor(t, func() bool { return h.srv.Resumes() > n })
	<-h.srv.Ready()
	m := h.srv.PostUser(dmID, alice, "still here", "")
	h.srv.DispatchMessage(m, false)
	if in := next(t, got); in.Text != "still here" {
		t.Fatalf("after the resumes: %+v", in)
	}
	if i := h.srv.Identifies(); i != 1 {
		t.Errorf("%d identifies, want 1", i)
	}
}

// A call that fails on the way to adapters.discord.api_url is logged with
// the URL it went to, never with discord.com (discordgo's own URL, which
// the transport rewrote).
func TestFailedCallNamesAPIURL(t *testing.T) {
	h := newHarness(t, nil)
	dead := h.srv.URL
	h.srv.Close() // nothing listens at api_url any more
	h.a = h.adapter(t, func(c *Config) { c.APIURL = dead })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.a.Run(ctx, func(context.Context, chat.Inbound) error { return nil }) }()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(h.logs.String(), "gateway discovery failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no failure logged:\n%s", h.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	logs := h.logs.String()
	if strings.Contains(logs, "discord.com") || !strings.Contains(logs, dead+"/api/v10/gateway/bot") {
		t.Errorf("the log names another URL than %s/api/v10/gateway/bot:\n%s", dead, logs)
	}
}
