package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redispairing"
)

// realRedis returns a client of the redis-server on 127.0.0.1:6379 and a
// random key prefix whose keys are deleted at the end; it skips the test
// when no server answers.
func realRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		rdb.Close()
		t.Skipf("no redis-server on 127.0.0.1:6379: %v", err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	prefix := "pibot-cmdtest-" + hex.EncodeToString(rnd[:]) + ":"
	t.Cleanup(func() {
		keys, _ := rdb.Keys(t.Context(), prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(t.Context(), keys...)
		}
		rdb.Close()
	})
	return rdb, prefix
}

// TestPairingInClusterMode: with cluster.redis_url the pairing commands
// change the store the replicas share in Redis, not pairing.json, and
// `pibot cluster status` answers on a cluster nobody runs yet.
func TestPairingInClusterMode(t *testing.T) {
	rdb, prefix := realRedis(t)
	keys, err := rediscluster.NewKeys([]byte("test cluster secret, 32 bytes at least"))
	if err != nil {
		t.Fatal(err)
	}
	store := redispairing.NewPairings(rdb, rediscluster.Options{Prefix: prefix, Keys: keys})
	code, _, err := store.RequestCode(t.Context(), "telegram", "555", "eve")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\ncluster:\n  redis_url: redis://127.0.0.1:6379/0\n  key_prefix: \""+prefix+"\"\n"+testClusterSecret)
	if r := pibot(t, dir, "", nil, "pairing", "approve", "telegram", code, "-c", cfg); r.code != 0 {
		t.Fatalf("pairing approve: exit %d, stderr %q", r.code, r.stderr)
	}
	ok, err := store.Approved(t.Context(), "telegram", "555")
	if err != nil || !ok {
		t.Fatalf("approved in Redis = %v, %v; want true", ok, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "d", "pairing.json")); !os.IsNotExist(err) {
		t.Fatalf("pairing.json written in cluster mode: %v", err)
	}
	r := pibot(t, dir, "", nil, "cluster", "status", "-c", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "no replica holds a lease") {
		t.Fatalf("cluster status: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// testClusterSecret is the cluster.secret line of the tests' cluster
// configurations.
const testClusterSecret = "  secret: \"test cluster secret, 32 bytes at least\"\n"
