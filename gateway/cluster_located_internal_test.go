package gateway

import (
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
)

// TestLocatedCache: an entry is returned while its owner's lease lives
// and dropped once it ended; forget drops one location, forgetOwners the
// locations of the owners given and no others, reset all.
func TestLocatedCache(t *testing.T) {
	locker, err := cluster.NewLocker(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	newOwner := func(path string) *owner {
		lease, err := locker.Acquire(t.Context(), path, 0)
		if err != nil {
			t.Fatal(err)
		}
		return &owner{sessionFile: &sessionFile{path: path, lease: lease}}
	}
	for _, tc := range []struct {
		name string
		// act runs after k1 and k3 were remembered bound to a, k2 to b.
		act func(c *locatedCache, a, b *owner)
		// want is the owner lookup returns per location ("a", "b" or
		// "" for none), and left the number of entries kept after.
		want [3]string
		left int
	}{
		{name: "alive", act: func(*locatedCache, *owner, *owner) {}, want: [3]string{"a", "b", "a"}, left: 3},
		{name: "lease ended", act: func(_ *locatedCache, a, _ *owner) { a.lease.Release(t.Context()) }, want: [3]string{"", "b", ""}, left: 1},
		{name: "forget", act: func(c *locatedCache, _, _ *owner) { c.forget("k2") }, want: [3]string{"a", "", "a"}, left: 2},
		{name: "forget owners", act: func(c *locatedCache, a, _ *owner) { c.forgetOwners(a) }, want: [3]string{"", "b", ""}, left: 1},
		{name: "forget no owner", act: func(c *locatedCache, _, _ *owner) { c.forgetOwners() }, want: [3]string{"a", "b", "a"}, left: 3},
		{name: "rebound", act: func(c *locatedCache, _, b *owner) { c.remember("k1", b) }, want: [3]string{"b", "b", "a"}, left: 3},
		{name: "reset", act: func(c *locatedCache, _, _ *owner) { c.reset() }, want: [3]string{"", "", ""}, left: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newOwner(tc.name+"/a"), newOwner(tc.name+"/b")
			defer a.lease.Release(t.Context())
			defer b.lease.Release(t.Context())
			names := map[*owner]string{a: "a", b: "b", nil: ""}
			var c locatedCache
			c.remember("k1", a)
			c.remember("k2", b)
			c.remember("k3", a)
			tc.act(&c, a, b)
			for i, key := range []string{"k1", "k2", "k3"} {
				if got := names[c.lookup(key)]; got != tc.want[i] {
					t.Errorf("lookup(%s) = %q, want %q", key, got, tc.want[i])
				}
			}
			if n := len(c.bound); n != tc.left {
				t.Errorf("%d entries kept, want %d", n, tc.left)
			}
		})
	}
}

// TestCachedOwnerIsALoadedOne: the registry returns a remembered owner
// only while it is the loaded owner of its session, and unloading it
// (forget, evictIdle) drops its locations from the cache; an entry
// remembered while its owner was being unloaded is dropped at its first
// lookup. (Entries of a forgotten owner used to stay in the cache until
// an idle eviction, keeping the unloaded owner and its session in memory.)
func TestCachedOwnerIsALoadedOne(t *testing.T) {
	g := newBareGateway(t)
	reg := g.sessions
	load := func(name string) (*owner, string) {
		conv := chat.ConvRef{Platform: "test", Channel: name, DM: true}
		o, _, err := reg.locate(t.Context(), chat.Inbound{Conv: conv})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(o.close)
		reg.located.remember(conv.Key(), o)
		return o, conv.Key()
	}
	entries := func() int {
		reg.located.mu.Lock()
		defer reg.located.mu.Unlock()
		return len(reg.located.bound)
	}

	o, key := load("forgotten")
	if got := reg.cached(key); got != o {
		t.Fatalf("cached = %p, want the loaded owner %p", got, o)
	}
	if !reg.forget(o) {
		t.Fatal("forget: the owner was not the loaded one")
	}
	if n := entries(); n != 0 {
		t.Fatalf("%d entries kept after the owner was unloaded", n)
	}
	// Remembered by a locate that found o just before it was unloaded.
	reg.located.remember(key, o)
	if got := reg.cached(key); got != nil {
		t.Fatal("cached returned an unloaded owner")
	}
	if n := entries(); n != 0 {
		t.Fatalf("%d entries kept after the lookup of an unloaded owner", n)
	}

	_, key = load("idle")
	if reg.evictIdle(time.Now().Add(time.Second)) != 1 {
		t.Fatal("the idle owner was not evicted")
	}
	if got := reg.cached(key); got != nil {
		t.Fatal("cached returned an evicted owner")
	}
	if n := entries(); n != 0 {
		t.Fatalf("%d entries kept after the owner was evicted", n)
	}
}
