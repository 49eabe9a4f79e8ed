package gateway_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/providers/faux"
)

var scheduledID = regexp.MustCompile("Scheduled `([0-9a-f]+)`")

// /schedule stores a prompt; its firing is a message from its creator at
// its location, answered like any other, after a visible notice.
func TestScheduleCommandAndFiring(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("the deploy looks fine")})
	<-h.g.Ready()
	got := h.answer(dmConv, "owner", "/schedule in 2h check the deploy")
	m := scheduledID.FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("answer %q, want Scheduled `ID`", got)
	}
	id := m[1]
	if list := h.answer(dmConv, "owner", "/schedule list"); !strings.Contains(list, id) || !strings.Contains(list, "check the deploy") {
		t.Fatalf("list = %q", list)
	}
	if err := gateway.FireSchedule(context.Background(), h.g, id); err != nil {
		t.Fatal(err)
	}
	h.waitText(dmConv, "⏰ Scheduled prompt `"+id+"`", "check the deploy")
	h.waitText(dmConv, "the deploy looks fine")
	h.waitFor("the prompt in the session", func() bool {
		for _, p := range h.sessions() {
			if slices.Contains(userTexts(h.entries(p)), "check the deploy") {
				return true
			}
		}
		return false
	})
	if got := h.answer(dmConv, "owner", "/schedule cancel "+id); !strings.Contains(got, "Cancelled") {
		t.Fatalf("cancel = %q", got)
	}
	if list := h.answer(dmConv, "owner", "/schedule list"); strings.Contains(list, id) {
		t.Fatalf("cancelled schedule listed: %q", list)
	}
}

// A firing passes the access check of its creator: a schedule whose
// creator may not talk to the bot (never paired, or revoked) runs nothing,
// and nothing is posted: no notice, no pairing code (issue #30.8).
func TestScheduleFiringObeysAccess(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("the owner's answer")})
	<-h.g.Ready()
	id, err := gateway.AddSchedule(h.g, dmConv, "mallory", "exfiltrate")
	if err != nil {
		t.Fatal(err)
	}
	if err := gateway.FireSchedule(context.Background(), h.g, id); err != nil {
		t.Fatal(err)
	}
	// A firing of the owner's after it: once it is answered, the first
	// one was long done with.
	own, err := gateway.AddSchedule(h.g, dmConv, "owner", "the owner's prompt")
	if err != nil {
		t.Fatal(err)
	}
	if err := gateway.FireSchedule(context.Background(), h.g, own); err != nil {
		t.Fatal(err)
	}
	h.waitText(dmConv, "the owner's answer")
	for _, msg := range h.ad.Messages(dmConv) {
		if strings.Contains(msg, id) || strings.Contains(msg, "pair") {
			t.Fatalf("a schedule of a user without access posted %q", msg)
		}
	}
	for _, txt := range h.lastRequestTexts() {
		if strings.Contains(txt, "exfiltrate") {
			t.Fatal("a schedule of a user without access reached the model")
		}
	}
	if ok, _ := pairingRequested(h, "mallory"); ok {
		t.Fatal("a firing made a pairing code for its creator")
	}
}

// pairingRequested reports whether user holds a pending pairing code.
func pairingRequested(h *harness, user string) (bool, error) {
	s, err := access.OpenStore(filepath.Join(h.dir, "pairing.json"))
	if err != nil {
		return false, err
	}
	reqs, _, err := s.List(h.t.Context())
	for _, r := range reqs {
		if r.User == user {
			return true, err
		}
	}
	return false, err
}

// A paired user's schedules stop once the pairing is revoked: the firing
// posts nothing in their DM (no notice, no new pairing code), runs
// nothing, and an owner's /schedule list in their own DM shows it as
// stopped, from where the owner may cancel it.
func TestScheduleOfRevokedCreatorStops(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("alice's prompt ran")})
	<-h.g.Ready()
	h.pairUser("alice")
	aliceDM := chat.ConvRef{Platform: "test", Channel: "dm-alice", DM: true}
	m := scheduledID.FindStringSubmatch(h.answer(aliceDM, "alice", "/schedule every day 09:00 report the logs"))
	if m == nil {
		t.Fatalf("alice's schedule not made: %q", h.ad.Messages(aliceDM))
	}
	id := m[1]
	if list := h.answer(dmConv, "owner", "/schedule list"); strings.Contains(list, id) {
		t.Fatalf("a schedule whose creator has access listed as stopped: %q", list)
	}
	s, err := access.OpenStore(filepath.Join(h.dir, "pairing.json"))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Revoke(t.Context(), "test", "alice"); !ok || err != nil {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	before := len(h.ad.Messages(aliceDM))
	if err := gateway.FireSchedule(context.Background(), h.g, id); err != nil {
		t.Fatal(err)
	}
	// The owner's listing (in the owner's mailbox, after the firing) shows it stopped.
	list := h.answer(dmConv, "owner", "/schedule list")
	if !strings.Contains(list, "Stopped schedules elsewhere") || !strings.Contains(list, "`"+id+"`") || !strings.Contains(list, "report the logs") {
		t.Fatalf("owner's list does not show the stopped schedule: %q", list)
	}
	if got := h.ad.Messages(aliceDM)[before:]; len(got) != 0 {
		t.Fatalf("the revoked creator was sent %q", got)
	}
	if ok, _ := pairingRequested(h, "alice"); ok {
		t.Fatal("the firing made a pairing code for the revoked creator")
	}
	if h.model.Calls() != 0 {
		t.Fatal("the revoked creator's schedule ran")
	}
	if ids := gateway.ScheduleIDs(h.g); !slices.Contains(ids, id) {
		t.Fatalf("the stopped schedule was removed: %v", ids)
	}
	if got := h.answer(dmConv, "owner", "/schedule cancel "+id); !strings.Contains(got, "Cancelled") {
		t.Fatalf("owner's cancel of a stopped schedule: %q", got)
	}
	if ids := gateway.ScheduleIDs(h.g); slices.Contains(ids, id) {
		t.Fatalf("cancelled schedule still stored: %v", ids)
	}
}

// A stopped schedule where the owner lists is marked there: here, a
// group that is not listed (where only owners are answered).
func TestScheduleStoppedMarkedHere(t *testing.T) {
	h := newHarness(t, nil)
	<-h.g.Ready()
	unlisted := chat.ConvRef{Platform: "test", Channel: "unlisted-group"}
	id, err := gateway.AddSchedule(h.g, unlisted, "alice", "in the group")
	if err != nil {
		t.Fatal(err)
	}
	mine, err := gateway.AddSchedule(h.g, unlisted, "owner", "the owner's own")
	if err != nil {
		t.Fatal(err)
	}
	list := h.answer(unlisted, "owner", "/schedule list")
	for _, line := range strings.Split(list, "\n") {
		switch {
		case strings.Contains(line, "`"+id+"`") && !strings.Contains(line, "⛔ stopped"):
			t.Errorf("alice's schedule not marked stopped: %q", line)
		case strings.Contains(line, "`"+mine+"`") && strings.Contains(line, "⛔"):
			t.Errorf("the owner's schedule marked stopped: %q", line)
		}
	}
	if !strings.Contains(list, "`"+id+"`") || !strings.Contains(list, "`"+mine+"`") {
		t.Fatalf("list = %q", list)
	}
	if strings.Contains(list, "elsewhere") {
		t.Errorf("a group's listing shows other locations: %q", list)
	}
}

// A user keeps at most Config.SchedulesPerUser schedules (default 10),
// over all their conversations; owners are not limited (issue #30.8).
func TestSchedulesPerUserCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	<-h.g.Ready()
	h.pairUser("alice")
	aliceDM := chat.ConvRef{Platform: "test", Channel: "dm-alice", DM: true}
	aliceDM2 := chat.ConvRef{Platform: "test", Channel: "dm-alice-2", DM: true}
	for i := range 10 {
		conv := aliceDM
		if i%2 == 1 {
			conv = aliceDM2 // counted over every conversation
		}
		if got := h.answer(conv, "alice", fmt.Sprintf("/schedule every day 09:%02d prompt %d", i, i)); !scheduledID.MatchString(got) {
			t.Fatalf("schedule %d refused: %q", i+1, got)
		}
	}
	got := h.answer(aliceDM, "alice", "/schedule every day 10:00 one too many")
	if scheduledID.MatchString(got) || !strings.Contains(got, "cancel one first") {
		t.Fatalf("11th schedule answered %q, want a refusal", got)
	}
	if n := len(gateway.ScheduleIDs(h.g)); n != 10 {
		t.Fatalf("%d schedules stored, want 10", n)
	}
	for i := range 11 {
		if got := h.answer(dmConv, "owner", fmt.Sprintf("/schedule every day 11:%02d owner %d", i, i)); !scheduledID.MatchString(got) {
			t.Fatalf("owner's schedule %d refused: %q", i+1, got)
		}
	}
}

// Config.SchedulesPerUser sets the cap.
func TestSchedulesPerUserConfigured(t *testing.T) {
	h := newHarness(t, nil, withConfig(func(c *gateway.Config) { c.SchedulesPerUser = 1 }))
	<-h.g.Ready()
	h.pairUser("alice")
	aliceDM := chat.ConvRef{Platform: "test", Channel: "dm-alice", DM: true}
	if got := h.answer(aliceDM, "alice", "/schedule in 1h first"); !scheduledID.MatchString(got) {
		t.Fatalf("first schedule refused: %q", got)
	}
	if got := h.answer(aliceDM, "alice", "/schedule in 2h second"); !strings.Contains(got, "cancel one first") {
		t.Fatalf("second schedule answered %q", got)
	}
}

// Usage errors and other users' schedules.
func TestScheduleCommandErrors(t *testing.T) {
	h := newHarness(t, nil)
	<-h.g.Ready()
	if got := h.answer(dmConv, "owner", "/schedule every fortnight 09:00 x"); !strings.Contains(got, "Usage:") {
		t.Errorf("bad spec answered %q", got)
	}
	if got := h.answer(dmConv, "owner", "/schedule cancel nope"); !strings.Contains(got, "No schedule `nope` here") {
		t.Errorf("cancel unknown answered %q", got)
	}
	// A schedule of another location cannot be cancelled from here.
	id, err := gateway.AddSchedule(h.g, groupConv, "owner", "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if got := h.answer(dmConv, "owner", "/schedule cancel "+id); !strings.Contains(got, "No schedule") {
		t.Errorf("cancel from another location answered %q", got)
	}
}

// A schedule from the configuration is listed at its location and cannot
// be cancelled from chat.
func TestScheduleFromConfig(t *testing.T) {
	h := newHarness(t, nil, withConfig(func(c *gateway.Config) {
		c.Schedules = []gateway.ScheduleSpec{{Name: "standup", Cron: "0 9 * * 1-5", TZ: "UTC", Location: dmConv, From: "owner", Prompt: "summarise"}}
	}))
	<-h.g.Ready()
	if list := h.answer(dmConv, "owner", "/schedule list"); !strings.Contains(list, "`cfg-standup`") || !strings.Contains(list, "summarise") {
		t.Fatalf("list = %q", list)
	}
	if got := h.answer(dmConv, "owner", "/schedule cancel cfg-standup"); !strings.Contains(got, "configuration file") {
		t.Fatalf("cancel = %q", got)
	}
}

// schedLocker grants every lease but, when refuse is set, the schedules
// one (another replica fires schedules).
type schedLocker struct {
	mu     sync.Mutex
	refuse bool
	asked  int // Acquires of the schedules lease
}

func (l *schedLocker) Acquire(_ context.Context, key string, _ int64) (cluster.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if key == "schedules" {
		l.asked++
		if l.refuse {
			return nil, cluster.ErrLeaseHeld
		}
	}
	return &revLease{done: make(chan struct{})}, nil
}

func (l *schedLocker) askedN() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asked
}

// The gateway's scheduler fires a due schedule on its own, under the
// schedules lease; a replica without the lease fires nothing.
func TestScheduleFiresUnderLease(t *testing.T) {
	t.Parallel()
	t.Run("holder", func(t *testing.T) {
		locker := &schedLocker{}
		h := newHarness(t, []faux.Turn{faux.Text("fired by the scheduler")}, withLocker(locker))
		<-h.g.Ready()
		id, err := gateway.AddScheduleAt(h.g, dmConv, "owner", "tick", time.Now().Add(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		h.waitText(dmConv, "⏰ Scheduled prompt `"+id+"`")
		h.waitText(dmConv, "fired by the scheduler")
		if ids := gateway.ScheduleIDs(h.g); len(ids) != 0 {
			t.Errorf("one-shot still stored after firing: %v", ids)
		}
	})
	t.Run("other replica", func(t *testing.T) {
		locker := &schedLocker{refuse: true}
		h := newHarness(t, []faux.Turn{faux.Text("MUST NOT FIRE")}, withLocker(locker))
		<-h.g.Ready()
		id, err := gateway.AddScheduleAt(h.g, dmConv, "owner", "tick", time.Now().Add(-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		h.waitFor("the lease asked twice", func() bool { return locker.askedN() >= 2 })
		if ids := gateway.ScheduleIDs(h.g); !slices.Contains(ids, id) {
			t.Errorf("a replica without the lease consumed the schedule: %v", ids)
		}
		for _, msg := range h.ad.Messages(dmConv) {
			if strings.Contains(msg, "MUST NOT FIRE") || strings.Contains(msg, "Scheduled prompt") {
				t.Fatalf("fired without the lease: %q", msg)
			}
		}
	})
}
