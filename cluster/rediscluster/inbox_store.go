package rediscluster

import (
	"context"
	"encoding/json"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster"
)

// inboxStore is what every part of the Inbox shares: the client, the
// names of the inbox's keys for this consumer, the options, the sealing
// of item data, and the repair of misshapen keys (repairer).
type inboxStore struct {
	rdb      redis.UniversalClient
	base     string // P{inbox}:
	replica  string
	consumer string
	opts     Options
	fix      *repairer
}

func (s *inboxStore) stream(key string) string { return s.base + "s:" + key }
func (s *inboxStore) touched() string          { return s.base + "t:" + s.consumer }
func (s *inboxStore) channel() string          { return s.base + "enqueued" }
func (s *inboxStore) epochKey() string         { return s.base + "epoch" }

// fixing runs fn, repairing the keys of key when Redis refused it for
// their shape (repairer.fixing).
func (s *inboxStore) fixing(ctx context.Context, key string, fn func() error) error {
	return s.fix.fixing(ctx, key, fn)
}

// The inbox seals each item's data for its stream (Options.Keys) at the Go
// boundary of its scripts: Enqueue and Admit seal, every read opens. The
// scripts move sealed text and never look inside it.

// seal returns data sealed for key's stream.
func (s *inboxStore) seal(key string, data []byte) string {
	return s.opts.Keys.Seal(s.stream(key), data)
}

// readable returns the items of key whose data opens, opened, for the
// listings (Pending, Quarantined), which change nothing: a forged item is
// dropped by the take that meets it.
func (s *inboxStore) readable(key string, items []cluster.InboxItem) []cluster.InboxItem {
	out := items[:0]
	for _, it := range items {
		plain, err := s.opts.Keys.Open(s.stream(key), string(it.Data))
		if err != nil {
			continue
		}
		it.Data = json.RawMessage(plain)
		out = append(out, it)
	}
	return out
}
