package web

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// MinTokenLen is the shortest token accepted on a listener that is not
// loopback (cmd/pibot enforces it, for the metrics token too): 32
// characters, what `openssl rand -hex 16` prints (128 random bits). The
// token gives an owner's rights (bash on the host) to anyone on the
// network who has it, and the per-address back-off slows one guesser,
// not many addresses: 16 hex characters (64 bits) was too little.
const MinTokenLen = 32

// Back-off on wrong tokens, per client address.
const (
	// freeFailures wrong tokens are answered with 401 at once; each
	// further one locks the address out for a doubling time.
	freeFailures = 5
	// firstLockout and maxLockout bound the lock-out time.
	firstLockout = time.Second
	maxLockout   = 5 * time.Minute
	// forgetAfter drops an address whose last failure is this old.
	forgetAfter = 30 * time.Minute
	// maxTracked bounds the memory: beyond it the address with the
	// oldest failure is forgotten first.
	maxTracked = 4096
)

// failures counts wrong tokens per client address. A locked-out address
// gets 429 before its token is even looked at, so guessing goes no faster
// than the lock-outs allow, right guesses included. IPv6 clients are
// counted per /64, the block one host usually holds.
type failures struct {
	mu    sync.Mutex
	addrs map[string]*failure
}

type failure struct {
	count int
	last  time.Time
	until time.Time
}

func newFailures() *failures { return &failures{addrs: map[string]*failure{}} }

// clientKey is the address r is counted under.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() != nil {
		return ip.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// locked returns how long key is still locked out (0: not).
func (f *failures) locked(key string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.addrs[key]
	if e == nil || !now.Before(e.until) {
		return 0
	}
	return e.until.Sub(now)
}

// fail records a wrong token from key and returns the lock-out it starts
// (0 while the address has failures to spare).
func (f *failures) fail(key string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.addrs[key]
	if e == nil {
		f.makeRoomLocked(now)
		e = &failure{}
		f.addrs[key] = e
	}
	e.count++
	e.last = now
	if e.count <= freeFailures {
		return 0
	}
	d := maxLockout
	if n := e.count - freeFailures - 1; n < 20 {
		d = min(firstLockout<<n, maxLockout)
	}
	e.until = now.Add(d)
	return d
}

// ok forgets key's failures after a right token.
func (f *failures) ok(key string) {
	f.mu.Lock()
	delete(f.addrs, key)
	f.mu.Unlock()
}

// makeRoomLocked forgets old addresses, and the stalest one when the
// table is still full.
func (f *failures) makeRoomLocked(now time.Time) {
	if len(f.addrs) < maxTracked {
		return
	}
	var oldest string
	for k, e := range f.addrs {
		if now.Sub(e.last) > forgetAfter && !now.Before(e.until) {
			delete(f.addrs, k)
			continue
		}
		if oldest == "" || e.last.Before(f.addrs[oldest].last) {
			oldest = k
		}
	}
	if len(f.addrs) >= maxTracked {
		delete(f.addrs, oldest)
	}
}

// tooMany answers a locked-out client.
func tooMany(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
	http.Error(w, "web chat: too many wrong tokens from your address; try again later", http.StatusTooManyRequests)
}
