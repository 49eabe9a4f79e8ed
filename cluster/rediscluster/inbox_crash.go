package rediscluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pibot/pibot/cluster"
)

// crashCounter is the crash and quarantine side of the Inbox: it starts
// this process's consumer (counting its predecessor's crash), records the
// items whose work began (Begin), counts a cut Leave, reads crash counts,
// lists the quarantined items and records a clean stop.
type crashCounter struct {
	st *inboxStore
}

// open starts this process's consumer (openScript).
func (c *crashCounter) open(ctx context.Context) error {
	return c.st.fixing(ctx, "", func() error {
		return openScript().Run(ctx, c.st.rdb, []string{c.st.base + "r:" + c.st.replica}, c.st.consumer, c.st.base).Err()
	})
}

// withCrashes turns id, data, n triples into items with their crash
// counts, and their order numbers.
func (c *crashCounter) withCrashes(ctx context.Context, key string, res []string) ([]cluster.InboxItem, []int64, error) {
	if len(res) == 0 {
		return nil, nil, nil
	}
	if len(res)%3 != 0 {
		return nil, nil, errors.New("malformed reply")
	}
	ids := make([]string, 0, len(res)/3)
	for i := 0; i < len(res); i += 3 {
		ids = append(ids, res[i])
	}
	counts, err := c.st.rdb.HMGet(ctx, c.st.base+"c:"+key, ids...).Result()
	if err != nil {
		return nil, nil, err
	}
	items := make([]cluster.InboxItem, 0, len(ids))
	order := make([]int64, 0, len(ids))
	for i := 0; i < len(res); i += 3 {
		it := cluster.InboxItem{ID: res[i], Key: key, Data: json.RawMessage(res[i+1])}
		if s, ok := counts[i/3].(string); ok {
			it.Crashes, _ = strconv.Atoi(s)
		}
		n, _ := strconv.ParseInt(res[i+2], 10, 64)
		items = append(items, it)
		order = append(order, n)
	}
	return items, order, nil
}

// quarantined returns the items set aside, oldest first.
func (c *crashCounter) quarantined(ctx context.Context) ([]cluster.InboxItem, error) {
	raw, err := c.st.rdb.LRange(ctx, c.st.base+"q", 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("rediscluster: inbox quarantined: %w", err)
	}
	out := make([]cluster.InboxItem, 0, len(raw))
	for _, r := range raw {
		var q struct {
			ID      string `json:"id"`
			Key     string `json:"key"`
			Data    string `json:"data"`
			Crashes int    `json:"crashes"`
		}
		if err := json.Unmarshal([]byte(r), &q); err != nil {
			return nil, fmt.Errorf("rediscluster: inbox quarantined: %w", err)
		}
		out = append(out, c.st.readable(q.Key, []cluster.InboxItem{{ID: q.ID, Key: q.Key, Data: json.RawMessage(q.Data), Crashes: q.Crashes}})...)
	}
	return out, nil
}

// close records a clean stop of this process: the items it still holds
// did not crash it. It does not close the client.
func (c *crashCounter) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.st.rdb.HSet(ctx, c.st.base+"r:"+c.st.replica, "c", c.st.consumer, "clean", "1").Err()
	if err != nil {
		return fmt.Errorf("rediscluster: inbox close: %w", err)
	}
	return nil
}

// begin records that this process executes the items ids of key (Inbox.Begin).
func (c *crashCounter) begin(ctx context.Context, key string, ids []string) error {
	members := make([]any, 0, len(ids))
	for _, id := range ids {
		if streamID().MatchString(id) {
			members = append(members, id+" "+key)
		}
	}
	if len(members) == 0 {
		return nil
	}
	if err := c.st.rdb.SAdd(ctx, c.st.touched(), members...).Err(); err != nil {
		return fmt.Errorf("rediscluster: inbox begin: %w", err)
	}
	return nil
}
