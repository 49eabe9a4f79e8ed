package llm

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// usageRef is Usage as encoding/json writes it (pi's key order), for the
// fast encoder to be compared with.
type usageRef struct {
	Input       int64 `json:"input"`
	Output      int64 `json:"output"`
	CacheRead   int64 `json:"cacheRead"`
	CacheWrite  int64 `json:"cacheWrite"`
	TotalTokens int64 `json:"totalTokens"`
	Cost        Cost  `json:"cost"`
}

// usageRefNoTotal is usageRef without totalTokens (Usage.NoTotal).
type usageRefNoTotal struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cacheRead"`
	CacheWrite int64 `json:"cacheWrite"`
	Cost       Cost  `json:"cost"`
}

func refJSON(t *testing.T, u Usage) string {
	t.Helper()
	var v any = usageRef{u.Input, u.Output, u.CacheRead, u.CacheWrite, u.TotalTokens, u.Cost}
	if u.NoTotal && u.TotalTokens == 0 {
		v = usageRefNoTotal{u.Input, u.Output, u.CacheRead, u.CacheWrite, u.Cost}
	}
	b, err := MarshalJSONNoEscape(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUsageEncodesLikeEncodingJSON: usage, alone and inside an assistant
// message, is written byte for byte as encoding/json writes it, whatever
// the costs (every float format: zero, negative zero, integers, fractions,
// exponent forms at both ends, the extremes, random bit patterns).
func TestUsageEncodesLikeEncodingJSON(t *testing.T) {
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 3, 4.8, 0.1 + 0.2, 1.5e-5, 0.000123, 1e-6, 9.99e-7, 1e-7, 1.25e-10,
		5e-324, 1e20, 1e21, 1.5e21, 123456789012345678, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1e-100, 2.5e-300}
	rng := rand.New(rand.NewPCG(15, 15))
	for len(floats) < 5000 {
		f := math.Float64frombits(rng.Uint64())
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			floats = append(floats, f)
		}
		floats = append(floats, rng.Float64()*math.Pow(10, float64(rng.IntN(40)-20)))
	}
	var usages []Usage
	for i, f := range floats {
		g := floats[(i*7+3)%len(floats)]
		usages = append(usages, Usage{
			Input: int64(i), Output: -int64(i) * 1000, CacheRead: math.MaxInt64, CacheWrite: math.MinInt64, TotalTokens: int64(i % 3),
			NoTotal: i%5 == 0,
			Cost:    Cost{Input: f, Output: g, CacheRead: -f, CacheWrite: f / 3, Total: f + g},
		})
	}
	usages = append(usages, Usage{}, Usage{NoTotal: true}, Usage{NoTotal: true, TotalTokens: 2})
	for _, u := range usages {
		want := refJSON(t, u)
		got, err := u.MarshalJSON()
		if err != nil || string(got) != want {
			t.Fatalf("%+v: MarshalJSON %s (%v), encoding/json %s", u, got, err, want)
		}
		m := Message{Role: RoleAssistant, Content: []Content{}, StopReason: StopStop, Usage: u}
		b, err := m.MarshalJSON()
		if err != nil || !strings.Contains(string(b), `"usage":`+want+`,"stopReason"`) {
			t.Fatalf("%+v: message %s (%v), want usage %s", u, b, err, want)
		}
	}
}

// TestUsageOtherCasesKeepEncodingJSON: usage with unknown keys (compacted
// by encoding/json) or a cost encoding/json refuses goes the old way.
func TestUsageOtherCasesKeepEncodingJSON(t *testing.T) {
	var u Usage
	if err := json.Unmarshal([]byte(`{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0.5,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.5},"x":{ "a" : [1, 2] }}`), &u); err != nil {
		t.Fatal(err)
	}
	m := Message{Role: RoleAssistant, Content: []Content{}, Usage: u}
	b, err := json.Marshal(m)
	if err != nil || !strings.Contains(string(b), `"total":0.5},"x":{"a":[1,2]}}`) {
		t.Fatalf("message with extra usage keys: %s (%v)", b, err)
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		m.Usage = Usage{Cost: Cost{Total: f}}
		if _, err := json.Marshal(m); err == nil || !strings.Contains(err.Error(), "unsupported value") {
			t.Errorf("cost %v: err %v, want encoding/json's unsupported value", f, err)
		}
	}
}

// TestUsageEncodingAllocations: usage is encoded into the buffer it is
// returned in, with no other allocation (it took two json.Encoders).
func TestUsageEncodingAllocations(t *testing.T) {
	u := Usage{Input: 200, Output: 16, TotalTokens: 216, Cost: Cost{Input: 0.0006, Output: 0.00024, Total: 0.00084}}
	if n := testing.AllocsPerRun(100, func() { _, _ = u.MarshalJSON() }); n > 1 {
		t.Errorf("Usage.MarshalJSON allocates %v times, want 1", n)
	}
}
