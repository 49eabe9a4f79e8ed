package telegramtest

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Limits is the fake's rate model: token buckets per chat and for the bot.
// A zero rate disables that bucket.
type Limits struct {
	PrivatePerSec float64 // messages per second in a private chat
	PrivateBurst  int
	GroupPerMin   float64 // messages per minute in a group (chat id < 0)
	GroupBurst    int
	GlobalPerSec  float64 // messages per second across all chats
	GlobalBurst   int
}

// DefaultLimits are the Bot FAQ's numbers: 1/s per private chat (burst 3),
// 20/min per group (burst 3), 30/s overall.
func DefaultLimits() Limits {
	return Limits{PrivatePerSec: 1, PrivateBurst: 3, GroupPerMin: 20, GroupBurst: 3, GlobalPerSec: 30, GlobalBurst: 30}
}

// rateMethods are the calls that count as messages.
var rateMethods = map[string]bool{
	"sendMessage": true, "editMessageText": true, "sendMessageDraft": true,
	"sendPhoto": true, "sendDocument": true, "editMessageReplyMarkup": true,
}

type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func (b *bucket) take(now time.Time) (wait time.Duration) {
	if b.rate <= 0 {
		return 0
	}
	b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

type rateModel struct {
	lim     Limits
	global  *bucket
	chats   map[int64]*bucket
	penalty map[int64]time.Time // chat id (0: whole bot) → retry_after expiry
	issued  map[int64]time.Time // when that penalty was announced
}

// inFlight is how long after a 429 other calls may still arrive that the
// client sent before it saw the 429: they are refused but are not
// violations (a client cannot recall a request already on the wire).
const inFlight = 100 * time.Millisecond

func newRateModel(l Limits) *rateModel {
	return &rateModel{
		lim:     l,
		global:  &bucket{rate: l.GlobalPerSec, burst: float64(max(l.GlobalBurst, 1)), tokens: float64(max(l.GlobalBurst, 1)), last: time.Now()},
		chats:   map[int64]*bucket{},
		penalty: map[int64]time.Time{},
		issued:  map[int64]time.Time{},
	}
}

func (m *rateModel) penalise(chat int64, seconds int) {
	now := time.Now()
	until := now.Add(time.Duration(seconds) * time.Second)
	if until.After(m.penalty[chat]) {
		m.penalty[chat] = until
		m.issued[chat] = now
	}
}

// check is called with s.mu held for every call that names a chat. It
// returns a 429 when the call breaks the model, and records a violation
// when it arrives before an earlier retry_after expired.
func (s *Server) checkRate(method string, chat int64) *apiError {
	m := s.rate
	now := time.Now()
	for _, key := range []int64{0, chat} {
		if until, ok := m.penalty[key]; ok && now.Before(until) {
			left := until.Sub(now)
			if now.Sub(m.issued[key]) < inFlight {
				return tooMany(int(math.Ceil(left.Seconds())))
			}
			s.violations = append(s.violations, fmt.Sprintf("%s to chat %d %s before retry_after expired", method, chat, left.Round(time.Millisecond)))
			// Telegram escalates the penalty for clients that ignore it.
			ra := int(math.Ceil(left.Seconds())) * 2
			m.penalise(key, ra)
			return tooMany(ra)
		}
	}
	if !rateMethods[method] {
		return nil
	}
	b := m.chats[chat]
	if b == nil {
		rate, burst := m.lim.PrivatePerSec, m.lim.PrivateBurst
		if chat < 0 {
			rate, burst = m.lim.GroupPerMin/60, m.lim.GroupBurst
		}
		burst = max(burst, 1)
		b = &bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
		m.chats[chat] = b
	}
	if w := b.take(now); w > 0 {
		ra := max(int(math.Ceil(w.Seconds())), 1)
		m.penalise(chat, ra)
		return tooMany(ra)
	}
	if w := m.global.take(now); w > 0 {
		b.tokens++ // the chat's token was not spent
		ra := max(int(math.Ceil(w.Seconds())), 1)
		m.penalise(0, ra)
		return tooMany(ra)
	}
	return nil
}

func tooMany(ra int) *apiError {
	return &apiError{code: 429, desc: "Too Many Requests: retry after " + strconv.Itoa(ra), retryAfter: ra}
}

// chatOf returns the chat_id of a call, 0 when it names none.
func chatOf(p map[string]string) int64 {
	id, _ := strconv.ParseInt(p["chat_id"], 10, 64)
	return id
}
