// Package redispairing is the pairing store the replicas of a cluster
// share in Redis: it passes the access.Store conformance suite
// (gateway/access/accesstest), so the limits of the pairing flow hold
// across replicas.
package redispairing

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/gateway/access"
)

// pairingState is what the pairing key holds: the same records, limits
// and rules as access.Store's file.
type pairingState struct {
	Pending  []access.Request `json:"pending"`
	Approved []access.Pairing `json:"approved"`
	Issued   []access.Issue   `json:"issued,omitempty"`
}

// maxTxRetries bounds the optimistic transaction retries of one pairing
// call when other replicas keep changing the state.
const maxTxRetries = 20

// Pairings is the pairing store the replicas share: pending requests,
// issued codes and paired users in one Redis key, changed with optimistic
// transactions (WATCH/MULTI), so the limits of the pairing flow
// (access.CodeTTL, access.CodeCooldown, access.MaxPendingPer) hold across
// replicas exactly as in access.Store.
//
// The state is sealed with the cluster secret (rediscluster.Keys): a
// state that does not open (written by someone with access to Redis but
// not the secret) is reported (Options.OnForged) and read as empty, so it
// pairs nobody; the next change replaces it.
type Pairings struct {
	rdb  redis.UniversalClient
	key  string
	now  func() time.Time
	opts rediscluster.Options
}

var _ access.Pairings = (*Pairings)(nil)

// NewPairings returns the shared pairing store, kept under
// opts.KeyPrefix().
func NewPairings(rdb redis.UniversalClient, opts rediscluster.Options) *Pairings {
	return &Pairings{rdb: rdb, key: opts.KeyPrefix() + "pairing", now: time.Now, opts: opts}
}

// read returns the state in tx's view.
func (p *Pairings) read(ctx context.Context, c redis.Cmdable) (pairingState, error) {
	var st pairingState
	b, err := c.Get(ctx, p.key).Bytes()
	if errors.Is(err, redis.Nil) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("redispairing: %w", err)
	}
	b, err = p.opts.Keys.Open(p.key, string(b))
	if err != nil {
		if p.opts.OnForged != nil {
			p.opts.OnForged("pairing", p.key)
		}
		return st, nil
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("redispairing: %s holds no pairing state: %w", p.key, err)
	}
	return st, nil
}

// update runs fn on the current state and stores what it returns, unless
// fn fails; it retries when another replica changed the state meanwhile.
func (p *Pairings) update(ctx context.Context, fn func(*pairingState) error) error {
	for range maxTxRetries {
		err := p.rdb.Watch(ctx, func(tx *redis.Tx) error {
			st, err := p.read(ctx, tx)
			if err != nil {
				return err
			}
			p.prune(&st)
			if err := fn(&st); err != nil {
				return err
			}
			b, err := json.Marshal(st)
			if err != nil {
				return fmt.Errorf("redispairing: %w", err)
			}
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				return pipe.Set(ctx, p.key, p.opts.Keys.Seal(p.key, b), 0).Err()
			})
			return err
		}, p.key)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
	return fmt.Errorf("redispairing: the state kept changing; try again")
}

// prune drops expired requests and cool-downs.
func (p *Pairings) prune(st *pairingState) {
	now := p.now()
	pending := st.Pending[:0]
	for _, r := range st.Pending {
		if now.Sub(r.Created) < access.CodeTTL {
			pending = append(pending, r)
		}
	}
	st.Pending = pending
	issued := st.Issued[:0]
	for _, r := range st.Issued {
		if now.Sub(r.At) < access.CodeCooldown {
			issued = append(issued, r)
		}
	}
	st.Issued = issued
}

// RequestCode returns the pending code of (platform, user), creating one
// if needed, with the limits of access.Store.RequestCode.
func (p *Pairings) RequestCode(ctx context.Context, platform, user, name string) (code string, created bool, err error) {
	err = p.update(ctx, func(st *pairingState) error {
		code, created = "", false
		n := 0
		for _, r := range st.Pending {
			if r.Platform == platform {
				if r.User == user {
					code = r.Code
					return errUnchanged
				}
				n++
			}
		}
		for _, r := range st.Issued {
			if r.Platform == platform && r.User == user {
				return fmt.Errorf("redispairing %s %s: %w", platform, user, access.ErrCooldown)
			}
		}
		if n >= access.MaxPendingPer {
			return fmt.Errorf("redispairing %s: %w", platform, access.ErrTooManyPending)
		}
		c, err := newCode()
		if err != nil {
			return err
		}
		now := p.now().UTC()
		st.Pending = append(st.Pending, access.Request{Platform: platform, User: user, Name: name, Code: c, Created: now})
		st.Issued = append(st.Issued, access.Issue{Platform: platform, User: user, At: now})
		code, created = c, true
		return nil
	})
	if errors.Is(err, errUnchanged) {
		err = nil
	}
	return code, created, err
}

// errUnchanged ends an update that has nothing to write.
var errUnchanged = errors.New("unchanged")

// codeAlphabet is access's: upper case without 0, O, 1 and I.
const codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

func newCode() (string, error) {
	var b [access.CodeLength]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("redispairing code: %w", err)
	}
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b[:]), nil
}

// Approve turns the pending request with code on platform into a pairing.
func (p *Pairings) Approve(ctx context.Context, platform, code string) (access.Pairing, error) {
	code = strings.ToUpper(strings.TrimSpace(code))
	var out access.Pairing
	err := p.update(ctx, func(st *pairingState) error {
		for i, r := range st.Pending {
			if r.Platform == platform && subtle.ConstantTimeCompare([]byte(r.Code), []byte(code)) == 1 {
				out = access.Pairing{Platform: r.Platform, User: r.User, Name: r.Name, Approved: p.now().UTC()}
				st.Pending = append(st.Pending[:i], st.Pending[i+1:]...)
				st.Approved = append(st.Approved, out)
				return nil
			}
		}
		return fmt.Errorf("redispairing %s %s: %w", platform, code, access.ErrUnknownCode)
	})
	return out, err
}

// Revoke removes an approved user, any pending request of theirs and
// their cool-down.
func (p *Pairings) Revoke(ctx context.Context, platform, user string) (bool, error) {
	found := false
	err := p.update(ctx, func(st *pairingState) error {
		found = false
		match := func(pl, u string) bool { return pl == platform && u == user }
		approved := st.Approved[:0]
		for _, a := range st.Approved {
			if match(a.Platform, a.User) {
				found = true
				continue
			}
			approved = append(approved, a)
		}
		st.Approved = approved
		pending := st.Pending[:0]
		for _, r := range st.Pending {
			if !match(r.Platform, r.User) {
				pending = append(pending, r)
			}
		}
		st.Pending = pending
		issued := st.Issued[:0]
		for _, r := range st.Issued {
			if !match(r.Platform, r.User) {
				issued = append(issued, r)
			}
		}
		st.Issued = issued
		return nil
	})
	return found, err
}

// List returns pending (unexpired) requests and approved users.
func (p *Pairings) List(ctx context.Context) ([]access.Request, []access.Pairing, error) {
	st, err := p.read(ctx, p.rdb)
	if err != nil {
		return nil, nil, err
	}
	p.prune(&st)
	return st.Pending, st.Approved, nil
}

// Approved reports whether (platform, user) is paired. An unreachable
// Redis is an error (the caller lets nobody in on it).
func (p *Pairings) Approved(ctx context.Context, platform, user string) (bool, error) {
	st, err := p.read(ctx, p.rdb)
	if err != nil {
		return false, err
	}
	for _, a := range st.Approved {
		if a.Platform == platform && a.User == user {
			return true, nil
		}
	}
	return false, nil
}
