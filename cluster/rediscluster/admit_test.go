package rediscluster_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/clustertest"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// admitReplica is one replica's admission on store "s" of b: its inbox,
// and its dedupe and sender budget (a burst of 2, no refill to speak of).
func admitReplica(t *testing.T, b redistest.Backend, replica string) (*rediscluster.Admission, *rediscluster.Inbox, *redistest.RoundTrips) {
	t.Helper()
	rdb, prefix, _ := b.Open(t, "s")
	opts := rediscluster.Options{Prefix: prefix}
	ib, err := rediscluster.OpenInbox(t.Context(), rdb, opts, replica)
	if err != nil {
		t.Fatal(err)
	}
	budget := rediscluster.NewBudget(rdb, opts, 0.001, 2)
	budget.SetClock(clustertest.NewClock().Now)
	rts := &redistest.RoundTrips{}
	rdb.AddHook(rts)
	return rediscluster.NewAdmission(rediscluster.NewDedupe(rdb, opts, time.Hour), budget, ib, nil), ib, rts
}

// TestAdmit: one round trip admits an event: a duplicate is dropped and
// takes no budget token, an event over its sender's budget is not
// enqueued, and a take hands the holder every item nobody took, oldest
// first, its own among them.
func TestAdmit(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			a, ib, rts := admitReplica(t, b, "replica-a")
			steps := []struct {
				name      string
				ad        cluster.Admission
				dup, wait bool
				taken     []string
			}{
				{"new", cluster.Admission{Dedupe: "e1", Budget: "u", Key: "loc", Data: []byte(`"one"`)}, false, false, nil},
				{"redelivered", cluster.Admission{Dedupe: "e1", Budget: "u", Key: "loc", Data: []byte(`"one again"`), Take: true}, true, false, nil},
				{"taken with the one before", cluster.Admission{Dedupe: "e2", Budget: "u", Key: "loc", Data: []byte(`"two"`), Take: true}, false, false, []string{`"one"`, `"two"`}},
				{"over budget", cluster.Admission{Dedupe: "e3", Budget: "u", Key: "loc", Data: []byte(`"three"`), Take: true}, false, true, nil},
				{"over budget, redelivered", cluster.Admission{Dedupe: "e3", Budget: "u", Key: "loc", Data: []byte(`"three"`), Take: true}, true, false, nil},
				{"not deduplicated nor budgeted", cluster.Admission{Key: "loc", Data: []byte(`"four"`), Take: true}, false, false, []string{`"four"`}},
				{"another sender", cluster.Admission{Dedupe: "e5", Budget: "v", Key: "loc2", Data: []byte(`"five"`)}, false, false, nil},
			}
			for i, s := range steps {
				n0 := rts.Count()
				got, err := a.Admit(ctx, s.ad)
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				// The first call may load the script (NOSCRIPT, then EVAL).
				if rt := rts.Since(n0); i > 0 && len(rt) != 1 {
					t.Errorf("%s: %d round trips %q, want 1", s.name, len(rt), rt)
				}
				if got.Dup != s.dup || (got.Wait > 0) != s.wait || !slices.Equal(itemData(got.Taken), s.taken) {
					t.Fatalf("%s: %+v; want dup %v, waiting %v, taken %q", s.name, got, s.dup, s.wait, s.taken)
				}
				if enqueued := !s.dup && !s.wait; enqueued != (got.ID != "") {
					t.Fatalf("%s: id %q; enqueued %v", s.name, got.ID, enqueued)
				}
				for _, it := range got.Taken {
					if it.Key != s.ad.Key {
						t.Fatalf("%s: taken item under %q", s.name, it.Key)
					}
				}
			}
			// One, two and four are taken; nothing is left to Consume, and
			// three never became an item.
			if got, err := ib.Consume(ctx, "loc"); err != nil || len(got) != 0 {
				t.Fatalf("consume after the takes = %q, %v", itemData(got), err)
			}
			p, err := ib.Pending(ctx, "loc")
			if err != nil || !slices.Equal(itemData(p), []string{`"one"`, `"two"`, `"four"`}) {
				t.Fatalf("pending = %q, %v", itemData(p), err)
			}
			// The duplicate left the sender's budget alone: u spent its
			// burst of 2 on one and two, so the third was refused.
			if seen, err := a.Seen(ctx, "e2"); err != nil || !seen {
				t.Fatalf("Seen(e2) after Admit = %v, %v; want seen", seen, err)
			}
			if keys, err := ib.Keys(ctx); err != nil || !slices.Equal(keys, []string{"loc", "loc2"}) {
				t.Fatalf("keys = %q, %v", keys, err)
			}
		})
	}
}

// TestAdmitOrderAcrossReplicas: an item another replica enqueued first
// comes before the holder's own in what its Admit takes, and what the
// holder took before is not taken again.
func TestAdmitOrderAcrossReplicas(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			holder, _, _ := admitReplica(t, b, "replica-a")
			other, _, _ := admitReplica(t, b, "replica-b")
			admit := func(a *rediscluster.Admission, ev, data string, take bool) []string {
				t.Helper()
				got, err := a.Admit(ctx, cluster.Admission{Dedupe: ev, Key: "loc", Data: []byte(data), Take: take})
				if err != nil || got.ID == "" {
					t.Fatalf("admit %s: %+v, %v", ev, got, err)
				}
				return itemData(got.Taken)
			}
			admit(other, "b1", `"b1"`, false)
			admit(other, "b2", `"b2"`, false)
			if got := admit(holder, "a1", `"a1"`, true); !slices.Equal(got, []string{`"b1"`, `"b2"`, `"a1"`}) {
				t.Fatalf("holder took %q, want b1, b2, a1", got)
			}
			admit(other, "b3", `"b3"`, false)
			if got := admit(holder, "a2", `"a2"`, true); !slices.Equal(got, []string{`"b3"`, `"a2"`}) {
				t.Fatalf("holder took %q, want b3, a2", got)
			}
		})
	}
}

// TestAdmitDuplicateAtTwoReplicas: one event delivered to two replicas
// at once becomes one item.
func TestAdmitDuplicateAtTwoReplicas(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			const rounds = 50
			replicas := []*rediscluster.Admission{}
			for _, r := range []string{"replica-a", "replica-b"} {
				a, _, _ := admitReplica(t, b, r)
				replicas = append(replicas, a)
			}
			_, ib, _ := admitReplica(t, b, "probe")
			for n := range rounds {
				ev := "ev" + string(rune('a'+n%26)) + string(rune('a'+n/26))
				var wg sync.WaitGroup
				ids := make([]string, len(replicas))
				for i, a := range replicas {
					wg.Go(func() {
						got, err := a.Admit(ctx, cluster.Admission{Dedupe: ev, Budget: "u" + ev, Key: "loc", Data: []byte(`"` + ev + `"`), Take: i == 0})
						if err != nil {
							t.Error(err)
						}
						ids[i] = got.ID
					})
				}
				wg.Wait()
				if (ids[0] == "") == (ids[1] == "") {
					t.Fatalf("%s: ids %q; want exactly one replica to enqueue it", ev, ids)
				}
			}
			p, err := ib.Pending(ctx, "loc")
			if err != nil || len(p) != rounds {
				t.Fatalf("%d items pending, %v; want %d", len(p), err, rounds)
			}
		})
	}
}

// TestAdmitTakenThenCrashed: an item its holder's Admit took, and that
// the holder never ended (it crashed), is claimed once by the next
// holder, and the crashed replica's restart counts the crash against it
// when the admission began its work (Run: the holder ran it at once), and
// not when it only took it (it waited behind other work).
func TestAdmitTakenThenCrashed(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		for _, run := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/run=%v", b.Name, run), func(t *testing.T) {
				ctx := t.Context()
				a, _, _ := admitReplica(t, b, "replica-a")
				_, ib, _ := admitReplica(t, b, "replica-b")
				got, err := a.Admit(ctx, cluster.Admission{Dedupe: "e1", Key: "loc", Data: []byte(`"one"`), Take: true, Run: run})
				if err != nil || !slices.Equal(itemData(got.Taken), []string{`"one"`}) {
					t.Fatalf("admit = %+v, %v", got, err)
				}
				// A is killed here (no Close). B takes the session over.
				if got, err := ib.Consume(ctx, "loc"); err != nil || len(got) != 0 {
					t.Fatalf("B consumes %q, %v: the item is A's", itemData(got), err)
				}
				claimed, err := ib.Claim(ctx, "loc")
				if err != nil || !slices.Equal(itemData(claimed), []string{`"one"`}) {
					t.Fatalf("B claim = %q, %v; want one", itemData(claimed), err)
				}
				if again, _ := ib.Claim(ctx, "loc"); len(again) != 0 {
					t.Fatalf("second claim = %q", itemData(again))
				}
				_, a2, _ := admitReplica(t, b, "replica-a") // A restarts
				want := 0
				if run {
					want = 1
				}
				p, err := a2.Pending(ctx, "loc")
				if err != nil || len(p) != 1 || p[0].Crashes != want {
					t.Fatalf("pending after A's restart = %+v, %v; want one at %d crashes", p, err, want)
				}
				if err := ib.Ack(ctx, "loc", claimed[0].ID); err != nil {
					t.Fatal(err)
				}
				if keys, err := a2.Keys(ctx); err != nil || len(keys) != 0 {
					t.Fatalf("keys after the ack = %q, %v", keys, err)
				}
			})
		}
	}
}

// An Admit whose answer was lost and that the client ran again enqueues
// one item, not two, is not its own duplicate, and still hands the holder
// the item its lost answer took.
func TestAdmitRunAgainAfterALostAnswer(t *testing.T) {
	for name, addr := range retryTargets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			rdb, px := retryingClient(t, addr)
			ib, err := rediscluster.OpenInbox(ctx, rdb, rediscluster.Options{}, "replica")
			if err != nil {
				t.Fatal(err)
			}
			budget := rediscluster.NewBudget(rdb, rediscluster.Options{}, 0.001, 2)
			a := rediscluster.NewAdmission(rediscluster.NewDedupe(rdb, rediscluster.Options{}, time.Hour), budget, ib, nil)
			if _, err := a.Admit(ctx, cluster.Admission{Dedupe: "warm", Key: "warm", Data: []byte(`"warm"`)}); err != nil {
				t.Fatal(err) // script loaded, connection open
			}
			px.dropAnswers(1)
			got, err := a.Admit(ctx, cluster.Admission{Dedupe: "e1", Budget: "u", Key: "loc", Data: []byte(`"one"`), Take: true})
			if err != nil || got.Dup || got.ID == "" || !slices.Equal(itemData(got.Taken), []string{`"one"`}) {
				t.Fatalf("admit through a lost answer = %+v, %v; want one enqueued and taken", got, err)
			}
			if p, err := ib.Pending(ctx, "loc"); err != nil || len(p) != 1 {
				t.Fatalf("%d items pending, %v; want 1", len(p), err)
			}
			// One token of u's burst of 2 is left.
			if got, err := a.Admit(ctx, cluster.Admission{Dedupe: "e2", Budget: "u", Key: "loc", Data: []byte(`"two"`)}); err != nil || got.Wait != 0 {
				t.Fatalf("second admit = %+v, %v; want it within the budget", got, err)
			}
		})
	}
}

// TestForgetKeepsAnEnqueuedEvent: a refused admission forgets its dedupe
// key so the platform's redelivery is taken, but when the refusal's
// answer was lost after the script enqueued the item (the key records the
// item's id), the key stays: the redelivery is a duplicate, not a second
// item of one event. The same holds for an event deduplicated by an
// earlier step (Seen, SeenReserve) and enqueued with Admission.Seen. A key
// whose event was not enqueued (over budget, or seen only) is forgotten.
func TestForgetKeepsAnEnqueuedEvent(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			a, ib, _ := admitReplica(t, b, "replica-a")
			admit := func(ad cluster.Admission) cluster.Admitted {
				t.Helper()
				res, err := a.Admit(ctx, ad)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			forget := func(key string) {
				t.Helper()
				if err := a.Forget(ctx, key); err != nil {
					t.Fatal(err)
				}
			}
			seen := func(key string) bool {
				t.Helper()
				dup, err := a.Seen(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return dup
			}

			// Admitted, its answer lost: the intake forgets the key.
			admit(cluster.Admission{Dedupe: "e1", Key: "loc", Data: []byte(`"one"`)})
			forget("e1")
			if res := admit(cluster.Admission{Dedupe: "e1", Key: "loc", Data: []byte(`"one"`)}); !res.Dup {
				t.Fatalf("the redelivery of an enqueued event: %+v, want a duplicate", res)
			}

			// Seen first, then enqueued (a message that opens a thread).
			if seen("e2") {
				t.Fatal("e2 seen before")
			}
			admit(cluster.Admission{Seen: "e2", Key: "loc", Data: []byte(`"two"`)})
			forget("e2")
			if !seen("e2") {
				t.Fatal("the redelivery of an event enqueued after Seen was taken again")
			}
			if got := itemData(pendingItems(t, ib, "loc")); !slices.Equal(got, []string{`"one"`, `"two"`}) {
				t.Fatalf("pending %q, want one item of each event", got)
			}

			// Not enqueued: forgotten, so the redelivery is taken.
			if seen("e3") {
				t.Fatal("e3 seen before")
			}
			forget("e3")
			if seen("e3") {
				t.Fatal("an event refused before its item was enqueued stays a duplicate")
			}
			admit(cluster.Admission{Dedupe: "e4", Budget: "u", Key: "loc", Data: []byte(`"four"`)})
			admit(cluster.Admission{Dedupe: "e5", Budget: "u", Key: "loc", Data: []byte(`"five"`)})
			if res := admit(cluster.Admission{Dedupe: "e6", Budget: "u", Key: "loc", Data: []byte(`"six"`)}); res.Wait <= 0 {
				t.Fatalf("third event of a burst of 2: %+v, want over budget", res)
			}
			forget("e6")
			if seen("e6") {
				t.Fatal("an event refused over budget stays a duplicate")
			}
		})
	}
}

func pendingItems(t *testing.T, ib *rediscluster.Inbox, key string) []cluster.InboxItem {
	t.Helper()
	items, err := ib.Pending(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// TestAdmitRunBeginsOnlyALoneItem: an admission with Run whose take also
// brings an older item nobody took (it waits first) records no work
// begun: the crash of its replica blames neither item.
func TestAdmitRunBeginsOnlyALoneItem(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			a, _, _ := admitReplica(t, b, "replica-a")
			_, other, _ := admitReplica(t, b, "replica-b")
			if _, _, err := other.Enqueue(ctx, "loc", []byte(`"older"`)); err != nil {
				t.Fatal(err)
			}
			got, err := a.Admit(ctx, cluster.Admission{Dedupe: "e1", Key: "loc", Data: []byte(`"new"`), Take: true, Run: true})
			if err != nil || !slices.Equal(itemData(got.Taken), []string{`"older"`, `"new"`}) {
				t.Fatalf("admit = %+v, %v", got, err)
			}
			_, a2, _ := admitReplica(t, b, "replica-a") // A crashed and restarts
			p, err := a2.Pending(ctx, "loc")
			if err != nil || len(p) != 2 || p[0].Crashes != 0 || p[1].Crashes != 0 {
				t.Fatalf("pending after A's restart = %+v, %v; want both at 0 crashes", p, err)
			}
		})
	}
}
