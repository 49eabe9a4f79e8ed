package e2e_test

import (
	"context"
	"iter"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// timedModel records when each provider request starts.
type timedModel struct {
	*faux.Model
	mu     sync.Mutex
	starts []time.Time
}

func (m *timedModel) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	m.mu.Lock()
	m.starts = append(m.starts, time.Now())
	m.mu.Unlock()
	return m.Model.Stream(ctx, req)
}

func (m *timedModel) last() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.starts[len(m.starts)-1]
}

// BenchmarkSlackReply streams replies of 60 tokens 25 ms apart (1.5 s
// each) through the gateway and the Slack adapter against the fake Slack,
// in a DM's main line (chat.postMessage + chat.update) and in a channel
// thread (chat.startStream / appendStream / stopStream). It reports the
// Web API calls per reply, the most calls of one message within a second,
// and the latency from the Socket Mode delivery to the provider request.
func BenchmarkSlackReply(b *testing.B) {
	for _, where := range []string{"dm", "thread"} {
		b.Run(where, func(b *testing.B) {
			var turns []faux.Turn
			for i := range b.N + 1 {
				turns = append(turns, faux.Text(words("tok", 59)+" end"+strconv.Itoa(i)+".").WithDelay(25*time.Millisecond))
			}
			w := newSlackWorld(b, turns, slackTimed())
			var lat []time.Duration
			var calls, worst int
			b.ResetTimer()
			for i := range b.N {
				before := len(w.slack.Calls())
				channel, thread := slackOwnerDM, ""
				say := slacktest.Say{Channel: slackOwnerDM, User: slackOwner, Text: "q" + strconv.Itoa(i)}
				if where == "thread" {
					channel = slackChannel
					say = slacktest.Say{Channel: slackChannel, User: slackOwner, Text: slackMention + " q" + strconv.Itoa(i)}
				}
				ts, bodies := w.slack.Post(say)
				if where == "thread" {
					thread = ts
				}
				sent := time.Now()
				for _, body := range bodies {
					w.slack.Deliver("events_api", body)
				}
				w.waitSlack(channel, thread, "end"+strconv.Itoa(i)+".")
				lat = append(lat, w.timed.last().Sub(sent))
				cs := w.slack.Calls()[before:]
				calls += len(cs)
				worst = max(worst, perSecond(cs))
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(calls)/float64(b.N), "calls/reply")
			b.ReportMetric(float64(worst), "max-calls/msg/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-to-provider-p50")
			if v := w.slack.Violations(); len(v) > 0 {
				b.Errorf("calls inside Retry-After windows: %q", v)
			}
		})
	}
}

// perSecond is the most update, append or stop calls one message got
// within any second.
func perSecond(cs []slacktest.Call) int {
	by := map[string][]time.Time{}
	for _, c := range cs {
		switch c.Method {
		case "chat.update", "chat.appendStream", "chat.stopStream":
			by[c.Params["ts"]] = append(by[c.Params["ts"]], c.Time)
		}
	}
	most := 0
	for _, ts := range by {
		for i := range ts {
			n := 0
			for j := i; j < len(ts) && ts[j].Sub(ts[i]) < time.Second; j++ {
				n++
			}
			most = max(most, n)
		}
	}
	return most
}

// withTimed serves a Telegram world's model through a timedModel.
func withTimed() option { return func(w *world) { w.timed = &timedModel{Model: w.model} } }

// BenchmarkTelegramReply is BenchmarkSlackReply's measure for Telegram: a
// private chat (drafts, then one message) and a group (a message and its
// edits).
func BenchmarkTelegramReply(b *testing.B) {
	for _, where := range []string{"private", "group"} {
		b.Run(where, func(b *testing.B) {
			var turns []faux.Turn
			for i := range b.N + 1 {
				turns = append(turns, faux.Text(words("tok", 59)+" end"+strconv.Itoa(i)+".").WithDelay(25*time.Millisecond))
			}
			w := newWorld(b, turns, withTimed())
			var lat []time.Duration
			calls := 0
			b.ResetTimer()
			for i := range b.N {
				before := len(w.srv.Calls())
				chatID, text := ownerChat, "q"+strconv.Itoa(i)
				if where == "group" {
					chatID, text = groupChat, "@"+botName+" q"+strconv.Itoa(i)
				}
				sent := time.Now()
				w.say(chatID, owner, text)
				w.waitMessage(chatID, "end"+strconv.Itoa(i)+".")
				lat = append(lat, w.timed.last().Sub(sent))
				for _, c := range w.srv.Calls()[before:] {
					if c.Method != "getUpdates" {
						calls++
					}
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(calls)/float64(b.N), "calls/reply")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-to-provider-p50")
		})
	}
}
