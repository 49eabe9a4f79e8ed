package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
)

type ev struct{ name, data string }

func readAll(t *testing.T, r io.Reader) []ev {
	t.Helper()
	var out []ev
	sr := NewReader(r)
	for {
		e, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev{string(e.Name), string(e.Data)})
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{"basic", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []ev{{"", `{"a":1}`}, {"", "[DONE]"}}},
		{"named crlf", "event: ping\r\ndata: x\r\n\r\n", []ev{{"ping", "x"}}},
		{"multiline", "data: a\ndata:b\ndata\n\n", []ev{{"", "a\nb\n"}}},
		{"comments and ids", ": keepalive\nid: 3\nretry: 10\n\nevent: e\ndata: 1\n\n", []ev{{"e", "1"}}},
		{"cut off", "data: last", []ev{{"", "last"}}},
		{"bom", "\xef\xbb\xbfdata: x\n\n", []ev{{"", "x"}}},
		{"long line", "data: " + strings.Repeat("x", 100000) + "\n\n", []ev{{"", strings.Repeat("x", 100000)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readAll(t, strings.NewReader(tt.in))
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events %v, want %v", len(got), got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("event %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestReaderError(t *testing.T) {
	boom := errors.New("boom")
	_, err := NewReader(io.MultiReader(strings.NewReader("data: x"), errReader{boom})).Next()
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}
