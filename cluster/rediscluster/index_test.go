package rediscluster_test

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster/rediscluster"
)

// The index seeds itself from the session files when Redis has never
// held it, and again after Redis lost its data; bindings made since the
// files were read are kept; a seed of more bindings than one script call
// carries is complete.
func TestIndexSeed(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	files := map[string]string{"tg:1": "/s/old.jsonl"}
	for i := range 1200 {
		files[fmt.Sprintf("tg:bulk:%d", i)] = fmt.Sprintf("/s/%d.jsonl", i)
	}
	var seeds atomic.Int32
	ix := rediscluster.NewIndex(rdb, rediscluster.Options{}, rediscluster.IndexOptions{Seed: func() (map[string]string, error) {
		seeds.Add(1)
		return files, nil
	}})
	ctx := t.Context()
	if err := ix.Bind(ctx, "tg:1", "/s/new.jsonl"); err != nil { // bound before the seed ran
		t.Fatal(err)
	}
	for _, tc := range []struct{ loc, want string }{
		{"tg:1", "/s/new.jsonl"}, {"tg:bulk:0", "/s/0.jsonl"}, {"tg:bulk:1199", "/s/1199.jsonl"},
	} {
		if p, ok, err := ix.Get(ctx, tc.loc); err != nil || !ok || p != tc.want {
			t.Fatalf("Get(%s) = %q, %v, %v; want %q", tc.loc, p, ok, err, tc.want)
		}
	}
	keys, err := ix.KeysWithPrefix(ctx, "tg:bulk")
	if err != nil || len(keys) != 1200 {
		t.Fatalf("KeysWithPrefix after the seed: %d keys, %v", len(keys), err)
	}
	if n := seeds.Load(); n != 1 {
		t.Fatalf("seeded %d times, want once", n)
	}

	mr.FlushAll() // Redis lost its data
	if p, ok, err := ix.Get(ctx, "tg:bulk:7"); err != nil || !ok || p != "/s/7.jsonl" {
		t.Fatalf("Get after Redis lost its data = %q, %v, %v", p, ok, err)
	}
	if n := seeds.Load(); n != 2 {
		t.Fatalf("seeded %d times, want twice", n)
	}
	// Another replica's index sees the seeded bindings without seeding.
	other := rediscluster.NewIndex(rdb, rediscluster.Options{}, rediscluster.IndexOptions{Seed: func() (map[string]string, error) {
		t.Error("a seeded index was seeded again")
		return nil, nil
	}})
	if p, ok, _ := other.Get(ctx, "tg:1"); !ok || p != "/s/old.jsonl" {
		t.Fatalf("other replica Get = %q, %v", p, ok)
	}
}

func TestIndexSeedError(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	boom := errors.New("sessions unreadable")
	ix := rediscluster.NewIndex(rdb, rediscluster.Options{}, rediscluster.IndexOptions{Seed: func() (map[string]string, error) {
		return nil, boom
	}})
	if _, _, err := ix.Get(t.Context(), "tg:1"); !errors.Is(err, boom) {
		t.Fatalf("Get with a failing seed = %v, want it wrapped", err)
	}
}

// Two deployments with different prefixes share one Redis without seeing
// each other's bindings.
func TestIndexPrefixesAreSeparate(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	a := rediscluster.NewIndex(rdb, rediscluster.Options{Prefix: "a:"}, rediscluster.IndexOptions{})
	b := rediscluster.NewIndex(rdb, rediscluster.Options{Prefix: "b:"}, rediscluster.IndexOptions{})
	if err := a.Set(t.Context(), "tg:1", "/a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.Get(t.Context(), "tg:1"); ok {
		t.Fatal("deployment b sees a's binding")
	}
	if keys := mr.Keys(); !slices.ContainsFunc(keys, func(k string) bool { return k == "a:{index}" }) {
		t.Fatalf("keys %q", keys)
	}
}
