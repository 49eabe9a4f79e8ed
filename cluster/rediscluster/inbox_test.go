package rediscluster_test

import (
	"slices"
	"testing"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

func openInbox(t *testing.T, b redistest.Backend, store, replica string) *rediscluster.Inbox {
	t.Helper()
	rdb, prefix, _ := b.Open(t, store)
	ib, err := rediscluster.OpenInbox(t.Context(), rdb, rediscluster.Options{Prefix: prefix}, replica)
	if err != nil {
		t.Fatal(err)
	}
	return ib
}

func itemData(items []cluster.InboxItem) []string {
	var out []string
	for _, it := range items {
		out = append(out, string(it.Data))
	}
	return out
}

// TestInboxTakeoverBetweenReplicas: replica B enqueues for a session A
// owns; A consumes and begins its work; A dies; B (now the lease holder)
// claims what A held and what nobody took, in order, once; A's restart
// counts its crash against the item whose work it had begun, which B
// still has.
func TestInboxTakeoverBetweenReplicas(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			a := openInbox(t, b, "s", "replica-a")
			rb := openInbox(t, b, "s", "replica-b")
			if _, _, err := rb.Enqueue(ctx, "loc", []byte(`"one"`)); err != nil {
				t.Fatal(err)
			}
			got, err := a.Consume(ctx, "loc")
			if err != nil || !slices.Equal(itemData(got), []string{`"one"`}) {
				t.Fatalf("A consume = %v, %v", itemData(got), err)
			}
			if err := a.Begin(ctx, "loc", got[0].ID); err != nil {
				t.Fatal(err)
			}
			if _, _, err := rb.Enqueue(ctx, "loc", []byte(`"two"`)); err != nil {
				t.Fatal(err)
			}
			// A is killed here (no Close). B takes the session over.
			got, err = rb.Claim(ctx, "loc")
			if err != nil || !slices.Equal(itemData(got), []string{`"one"`, `"two"`}) {
				t.Fatalf("B claim = %v, %v; want one, two", itemData(got), err)
			}
			if got, _ := rb.Claim(ctx, "loc"); len(got) != 0 {
				t.Fatalf("second claim = %v", itemData(got))
			}
			if got, _ := a.Consume(ctx, "loc"); len(got) != 0 {
				t.Fatalf("consume after the claim = %v", itemData(got))
			}
			// A restarts: its crash counts against "one", still pending.
			a2 := openInbox(t, b, "s", "replica-a")
			p, err := a2.Pending(ctx, "loc")
			if err != nil || len(p) != 2 || p[0].Crashes != 1 || p[1].Crashes != 0 {
				t.Fatalf("pending after A's restart = %+v, %v; want one at 1 crash, two at 0", p, err)
			}
			for _, it := range p {
				if err := rb.Ack(ctx, "loc", it.ID); err != nil {
					t.Fatal(err)
				}
			}
			if ks, err := a2.Keys(ctx); err != nil || len(ks) != 0 {
				t.Fatalf("keys after every ack = %q, %v", ks, err)
			}
			if err := a2.Sync(); err != nil {
				t.Fatalf("Sync on a live Redis: %v", err)
			}
		})
	}
}
