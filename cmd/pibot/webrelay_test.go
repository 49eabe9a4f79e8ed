package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/adapters/web"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster/rediscluster"
)

// webReplica is a web chat as a replica runs it, with its bus on Redis,
// serving its API.
type webReplica struct {
	ad  *web.Adapter
	srv *httptest.Server
}

// startWebReplicas starts n web chats whose buses are rep's, and waits
// until each has subscribed.
func startWebReplicas(tb testing.TB, rep *replicaState, n int) []webReplica {
	tb.Helper()
	var out []webReplica
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	tb.Cleanup(func() { cancel(); wg.Wait() })
	for range n {
		ad, err := web.New(web.Config{Bus: rep.webBus()})
		if err != nil {
			tb.Fatal(err)
		}
		wg.Go(func() { _ = ad.Run(ctx, func(context.Context, chat.Inbound) error { return nil }) })
		srv := httptest.NewServer(ad.Handler())
		tb.Cleanup(srv.Close)
		out = append(out, webReplica{ad: ad, srv: srv})
	}
	ch := rep.opts.KeyPrefix() + webTopic
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got, err := rep.rdb.PubSubNumSub(ctx, ch).Result()
		if err == nil && got[ch] >= int64(n) {
			return out
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d web chats subscribed to %s", got[ch], n, ch)
		}
	}
}

// redisReplica is the Redis side of a replica on the real server under
// a random key prefix (deleted at the end); it skips without a server.
func redisReplica(tb testing.TB) *replicaState {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		rdb.Close()
		tb.Skipf("no redis-server on 127.0.0.1:6379: %v", err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tb.Cleanup(func() { rdb.Close() })
	return &replicaState{rdb: rdb, id: "r", opts: rediscluster.Options{Prefix: "pibot-cmdtest-" + hex.EncodeToString(rnd[:]) + ":"}}
}

// events opens conversation conv's event stream on r and returns a
// function that waits for the next data line containing sub.
func events(tb testing.TB, r webReplica, conv string) func(sub string) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.srv.URL+"/api/events?conv="+conv, nil)
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cancel(); resp.Body.Close() })
	br := bufio.NewReader(resp.Body)
	return func(sub string) {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				tb.Fatalf("events: %v", err)
			}
			if strings.HasPrefix(line, "data: ") && strings.Contains(line, sub) {
				return
			}
		}
	}
}

// TestWebBus: without cluster mode the web chat has no bus (a nil
// interface, not a nil *Topic); in cluster mode a reply written by one
// replica's web chat reaches a browser of another through Redis, under
// the key prefix.
func TestWebBus(t *testing.T) {
	var none *replicaState
	if bus := none.webBus(); bus != nil {
		t.Fatalf("webBus without cluster mode = %#v, want nil", bus)
	}
	rep := redisReplica(t)
	rs := startWebReplicas(t, rep, 2)
	next := events(t, rs[0], "c1")
	next(`"type":"ready"`)
	conv := chat.ConvRef{Platform: web.Platform, Channel: "c1", DM: true}
	if _, err := rs[1].ad.Send(t.Context(), conv, chat.Out{Markdown: "from the other replica"}); err != nil {
		t.Fatal(err)
	}
	next("from the other replica")
}

// BenchmarkWebRelay is the time from a replica's Send to a browser of
// another replica reading the message (Redis pub/sub on 127.0.0.1).
func BenchmarkWebRelay(b *testing.B) {
	rep := redisReplica(b)
	rs := startWebReplicas(b, rep, 2)
	next := events(b, rs[0], "c1")
	next(`"type":"ready"`)
	conv := chat.ConvRef{Platform: web.Platform, Channel: "c1", DM: true}
	texts := [2]string{"ping a", "ping b"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := rs[1].ad.Send(context.Background(), conv, chat.Out{Markdown: texts[i%2]}); err != nil {
			b.Fatal(err)
		}
		next(texts[i%2])
	}
}
