package access_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/gateway/access/accesstest"
)

func TestFileStoreConformance(t *testing.T) {
	accesstest.RunPairingStoreTests(t, accesstest.Harness{
		Open: func(t *testing.T) (accesstest.Store, func(time.Duration)) {
			s, err := access.OpenStore(filepath.Join(t.TempDir(), "pairing.json"))
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			now := time.Unix(1_800_000_000, 0)
			s.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
			return s, func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
		},
	})
}
