package gateway_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway"
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
// creator may not talk to the bot (never paired, or revoked) runs nothing.
func TestScheduleFiringObeysAccess(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("SHOULD NOT RUN")})
	<-h.g.Ready()
	id, err := gateway.AddSchedule(h.g, dmConv, "mallory", "exfiltrate")
	if err != nil {
		t.Fatal(err)
	}
	if err := gateway.FireSchedule(context.Background(), h.g, id); err != nil {
		t.Fatal(err)
	}
	h.waitText(dmConv, "⏰ Scheduled prompt")
	// The pairing answer goes to mallory; the model is never asked.
	h.waitFor("the refusal", func() bool {
		return strings.Contains(strings.Join(h.ad.Messages(dmConv), "\n"), "pair")
	})
	for _, msg := range h.ad.Messages(dmConv) {
		if strings.Contains(msg, "SHOULD NOT RUN") {
			t.Fatal("a schedule of a user without access ran")
		}
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
