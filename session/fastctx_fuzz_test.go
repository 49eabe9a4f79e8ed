package session

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// genFile builds a session file from the choices in data (one byte a
// choice; zeros once data runs out): entries of every type, in the key
// orders pi, pi's migration and pibot write and in others (keys before
// and after the message, keys given twice, a fence after the message),
// branches, unknown parents, duplicate ids, fences, messages with escapes
// longer than the read buffer, and now and then a damaged line. It
// returns the file and the ids, every one a leaf to ask for.
func genFile(data []byte) ([]byte, []string) {
	at := 0
	pick := func(n int) int {
		if at >= len(data) {
			return 0
		}
		at++
		return int(data[at-1]) % n
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}` + "\n")
	var ids []string
	fence := 0
	count := 2 + pick(12)
	for j := range count {
		id := fmt.Sprintf("e%d", j)
		if j > 0 && pick(8) == 0 {
			id = ids[pick(len(ids))] // a duplicate
		}
		parent := "null"
		switch c := pick(8); {
		case j == 0 || c == 0:
		case c == 1:
			parent = `"` + ids[pick(len(ids))] + `"`
		case c == 2:
			parent = `"gone"`
		default:
			parent = `"` + ids[len(ids)-1] + `"`
		}
		ts := fmt.Sprintf(`"2026-01-01T00:00:%02d.000Z"`, j)
		text := "t" + id
		if pick(3) == 0 {
			text = strings.Repeat(`long \"quoted\" \\ text {[ `, 1+pick(20))
		}
		var typ, body string // body: the members after the envelope
		isMsg := false
		switch pick(11) {
		case 0, 1:
			typ, isMsg = "message", true
			body = `"message":{"role":"user","content":[{"type":"text","text":"` + text + `"}],"timestamp":1}`
		case 2:
			typ, isMsg = "message", true
			body = `"message":{"role":"assistant","content":[{"type":"text","text":"` + text + `"}],"provider":"p","model":"m` + id + `","usage":{"input":1,"output":2},"stopReason":"stop","timestamp":2}`
		case 3:
			typ, isMsg = "message", true
			body = `"message":{"role":"toolResult","toolCallId":"c","toolName":"bash","content":"` + text + `","isError":false,"timestamp":3}`
		case 4:
			typ, body = "thinking_level_change", `"thinkingLevel":"`+[]string{"off", "low", "high"}[pick(3)]+`"`
		case 5:
			typ, body = "model_change", `"provider":"p","modelId":"x`+id+`"`
		case 6:
			typ, body = "label", `"targetId":"e0","label":"l`+id+`"`
		case 7:
			kept := "e0"
			if len(ids) > 0 {
				kept = ids[pick(len(ids))]
			}
			typ, body = "compaction", `"summary":"sum`+id+`","firstKeptEntryId":"`+kept+`","tokensBefore":5`
		case 8:
			typ, body = "custom_message", `"customType":"k","content":"`+text+`","display":true`
		case 9:
			typ, body = "branch_summary", `"fromId":"e0","summary":"went `+id+`"`
		default:
			typ, body = "custom", `"customType":"pibot.x","data":{"message":{"id":"inner"}}`
		}
		if isMsg {
			switch pick(30) {
			case 0:
				body = `"message":"x"`
			case 1:
				body = `"message":{"role":"user","content":[7]}`
			}
		}
		fenceM := ""
		if pick(6) == 0 {
			fence += 1 + pick(2)
			if pick(8) == 0 {
				fence -= 3 // stale
			}
			fenceM = fmt.Sprintf(`"fence":%d`, fence)
		}
		env := []string{`"id":"` + id + `"`, `"parentId":` + parent, `"timestamp":` + ts}
		ty := `"type":"` + typ + `"`
		var members []string
		switch pick(7) {
		case 0: // pi
			members = append(append([]string{ty}, env...), body)
		case 1: // pi's migration: id and parentId appended
			members = []string{ty, env[2], body, env[0], env[1]}
		case 2: // pibot
			members = append(append([]string{ty}, env...), `"pibot":{"loc":"l","msg":"m`+id+`"}`)
			if fenceM != "" {
				members = append(members, fenceM)
				fenceM = ""
			}
			members = append(members, body)
		case 3: // the body first
			members = []string{body, env[1], ty, env[0], env[2]}
		case 4: // keys given twice: the last counts
			members = []string{ty, `"id":"decoy"`, `"parentId":"e0"`, env[2], body, env[0], env[1]}
		case 5: // a fence after the message, then more
			members = append(append([]string{ty}, env...), body)
			if fenceM != "" {
				members = append(members, fenceM)
				fenceM = ""
			}
			members = append(members, `"pibot":{"loc":"l"}`)
		default:
			members = []string{env[0], ty, env[1], body, env[2]}
		}
		if fenceM != "" {
			members = append(members, fenceM)
		}
		line := "{" + strings.Join(members, ",") + "}"
		switch pick(60) {
		case 0:
			line = line[:len(line)/2] // cut
		case 1:
			line = strings.Replace(line, `"text":"`, `"text":x"`, 1) // not JSON
		case 2:
			line += "\r" // CRLF
		}
		b.WriteString(line)
		if j < count-1 || pick(4) != 0 {
			b.WriteByte('\n')
		}
		ids = append(ids, id)
	}
	return b.Bytes(), ids
}

// checkContextLikeLoader writes the file and asks the fast path (with the
// small sizes in data's first bytes) and the full loader for the context
// of every entry, the default leaf and an unknown one: the answers and
// errors must be the same bytes. It returns how many the fast path
// answered by itself.
func checkContextLikeLoader(t *testing.T, dir string, data []byte, reasons map[string]int) int {
	t.Helper()
	sizes := fastSizes{buf: 32, parallel: 64}
	if len(data) > 1 {
		sizes = fastSizes{buf: 16 + int(data[0])*4, parallel: 32 + int64(data[1])*16}
		data = data[2:]
	}
	file, ids := genFile(data)
	p := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(p, file, 0o600); err != nil {
		t.Fatal(err)
	}
	fast := 0
	for _, leaf := range append([]string{"", "nope"}, ids...) {
		var want []byte
		s, err := OpenFile(p, Options{ReadOnly: true})
		if err == nil {
			var c Context
			if c, err = s.Tree().Context(leaf); err == nil {
				want, _ = c.MarshalJSON()
				want = append(want, '\n')
			}
			s.Close()
		}
		var got bytes.Buffer
		var st ContextStats
		_, gerr := writeContext(&got, p, leaf, &st, sizes)
		if fmt.Sprint(gerr) != fmt.Sprint(err) || !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("leaf %q (fast %v, %s; sizes %+v): fast path %v\n%s\nfull loader %v\n%s\nfile:\n%s", leaf, st.Fast, st.Fallback, sizes, gerr, got.Bytes(), err, want, file)
		}
		if st.Fast {
			fast++
		} else if reasons != nil {
			r := st.Fallback
			if i := strings.Index(r, ": "); i >= 0 && strings.HasPrefix(r, "entry at byte") {
				r = r[i+2:]
			}
			reasons[r]++
		}
	}
	return fast
}

// FuzzContext: WriteContext's fast path answers every leaf of every
// generated file exactly like the full loader, or leaves it to it.
// go test -run=^$ -fuzz=FuzzContext -fuzztime=30s ./session/ (CI runs it).
func FuzzContext(f *testing.F) {
	r := rand.New(rand.NewPCG(29, 6))
	for range 24 {
		seed := make([]byte, 200)
		for i := range seed {
			seed[i] = byte(r.Uint32())
		}
		f.Add(seed)
	}
	f.Add([]byte{0, 0, 11, 1, 1, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0})    // pi-migrated messages, a thinking level leaf
	f.Add([]byte{255, 255, 5, 0, 3, 2, 0, 2, 0, 0, 1, 0, 7, 1, 4}) // long lines, keys given twice
	f.Fuzz(func(t *testing.T, data []byte) {
		checkContextLikeLoader(t, t.TempDir(), data, nil)
	})
}

// TestContextLikeLoader runs FuzzContext's property over 300 generated
// files, and checks that the fast path answers most of their leaves by
// itself (a fast path that always gave up would pass FuzzContext).
func TestContextLikeLoader(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 29))
	dir := t.TempDir()
	fast, leaves := 0, 0
	reasons := map[string]int{}
	files := 300
	if testing.Short() {
		files = 80 // scripts/test's quick loop; scripts/test --all runs 300
	}
	for range files {
		data := make([]byte, 2+r.IntN(300))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		fast += checkContextLikeLoader(t, dir, data, reasons)
		_, ids := genFile(data[2:])
		leaves += len(ids) + 2
	}
	t.Logf("%d of %d leaves answered the fast way; fallbacks: %v", fast, leaves, reasons)
	if fast < leaves/4 {
		t.Fatalf("only %d of %d leaves answered the fast way", fast, leaves)
	}
}
