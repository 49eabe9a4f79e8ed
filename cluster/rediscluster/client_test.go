package rediscluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/pibot/pibot/cluster/rediscluster"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url      string
		ok       bool
		addr     string
		db       int
		password string
		tls      bool
	}{
		{url: "redis://127.0.0.1:6379", ok: true, addr: "127.0.0.1:6379"},
		{url: "redis://:pw@r:6380/3", ok: true, addr: "r:6380", db: 3, password: "pw"},
		{url: "rediss://u:pw@r/1", ok: true, addr: "r:6379", db: 1, password: "pw", tls: true},
		{url: "http://:s3cret@r:6379"},
		{url: "redis://:s3cret@r:6379/notadb"},
		{url: "redis://:s3cret@r:6379/?bogus_option=1"},
		{url: "redis://:s3cret@r:6379/%zz"},
	}
	for _, tt := range tests {
		opt, err := rediscluster.ParseURL(tt.url)
		if !tt.ok {
			if err == nil {
				t.Errorf("ParseURL(%q) accepted", tt.url)
			} else if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("ParseURL error repeats the password: %v", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tt.url, err)
			continue
		}
		if opt.Addr != tt.addr || opt.DB != tt.db || opt.Password != tt.password || (opt.TLSConfig != nil) != tt.tls {
			t.Errorf("ParseURL(%q) = addr %s db %d password %q tls %v", tt.url, opt.Addr, opt.DB, opt.Password, opt.TLSConfig != nil)
		}
	}
}

// Dial checks the server answers and returns a client whose calls end at
// their context's deadline; an unreachable server is an error at once.
func TestDial(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.RequireAuth("pw")
	rdb, err := rediscluster.Dial(t.Context(), "redis://:pw@"+mr.Addr()+"/0")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if !rdb.Options().ContextTimeoutEnabled {
		t.Fatal("Dial's client ignores context deadlines")
	}
	if _, err := rediscluster.Dial(t.Context(), "redis://:wrong@"+mr.Addr()); err == nil || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("Dial with a wrong password = %v; want an error without the password", err)
	}
	addr := mr.Addr()
	mr.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := rediscluster.Dial(ctx, "redis://"+addr); err == nil {
		t.Fatal("Dial of a stopped server succeeded")
	}
}
