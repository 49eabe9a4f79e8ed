package rediscluster

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// peekScript tells which streams KEYS a take would hand anything now, and
// returns their positions in KEYS (from 1). ARGV[1] is this consumer,
// ARGV[2] "claim" or "", ARGV[2+i] the number of items of KEYS[i] this
// process has in hand (given). A stream has something for a Consume when
// it has entries after its group's last delivered one (nobody took them),
// or when this consumer holds more of its entries than it has in hand
// (takes whose answers were lost took them: a Consume hands over those
// after since); and for a Claim also when another consumer holds some.
// A stream without the group is named (the take repairs it); one of
// another type fails the call. It changes nothing.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var peekScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local out = {}
for i, stream in ipairs(KEYS) do
  if redis.call('EXISTS', stream) == 1 then
    local hit, last = true, nil
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
      local f = {}
      for j = 1, #g, 2 do f[g[j]] = g[j + 1] end
      if f['name'] == 'pibot' then last = f['last-delivered-id'] end
    end
    if last then
      hit = #redis.call('XRANGE', stream, '(' .. last, '+', 'COUNT', 1) > 0
      if not hit then
        local p = redis.call('XPENDING', stream, 'pibot')
        if type(p[4]) == 'table' then
          for _, c in ipairs(p[4]) do
            if c[1] == ARGV[1] then
              hit = hit or tonumber(c[2]) > tonumber(ARGV[2 + i])
            elseif ARGV[2] == 'claim' then
              hit = true
            end
          end
        end
      end
    end
    if hit then table.insert(out, i) end
  end
end
return out
`)
})

// maxPeeked bounds the keys one peekScript call looks at: a script
// holds Redis for its whole run (about four commands a key), and an
// admission waits behind it.
const maxPeeked = 64

// Takeable returns the keys among keys that a Consume would hand an item
// now, and with claim also those a Claim would (peekScript), in one round
// trip per maxPeeked keys: the pump asks it about the sessions it holds
// before it takes any, so a poll of a replica with runs in progress
// costs one round trip more instead of one per run. It may name a key
// whose take then hands nothing (an item ended meanwhile, or one a lost
// answer of a claim took, which only a claim hands over). Each key is
// named once.
func (ib *Inbox) Takeable(ctx context.Context, keys []string, claim bool) ([]string, error) {
	var out []string
	named := map[string]bool{}
	for part := range slices.Chunk(keys, maxPeeked) {
		at, err := ib.peek(ctx, part, claim)
		if err != nil {
			return nil, fmt.Errorf("rediscluster: inbox takeable: %w", err)
		}
		for _, i := range at {
			if i < 1 || int(i) > len(part) {
				return nil, fmt.Errorf("rediscluster: inbox takeable: %w", errMalformed)
			}
			if k := part[i-1]; !named[k] {
				named[k] = true
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// peek runs peekScript on keys and returns the positions (from 1) of
// those it names.
func (ib *Inbox) peek(ctx context.Context, keys []string, claim bool) ([]int64, error) {
	mode := ""
	if claim {
		mode = "claim"
	}
	streams := make([]string, len(keys))
	args := make([]any, 0, 2+len(keys))
	args = append(args, ib.st.consumer, mode)
	for i, k := range keys {
		streams[i] = ib.st.stream(k)
		args = append(args, ib.takes.given.inHand(k))
	}
	return peekScript().Run(ctx, ib.st.rdb, streams, args...).Int64Slice()
}
