package chat

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestSplitterMatchesSplit: one Splitter used for a sequence of texts (a
// reply growing, then others) cuts each exactly as a fresh Split does.
func TestSplitterMatchesSplit(t *testing.T) {
	long := strings.Repeat("A sentence that goes on. ", 40)
	texts := []string{
		"short",
		"see [the docs][d]\n\n[d]: https://example.com/docs",
		"```go\n" + strings.Repeat("fmt.Println(\"x\")\n", 60) + "```",
		"- one\n- two\n- " + long,
		long + "\n\n> " + long,
		"",
		"| a | b |\n|---|---|\n| 1 | 2 |",
	}
	for _, d := range []Dialect{DialectTelegram, DialectSlack, DialectMarkdown, DialectPlain} {
		sp := NewSplitter(d)
		for i, md := range texts {
			for _, limit := range []int{64, 300} {
				if got, want := sp.Split(md, limit), Split(md, d, limit); !slices.Equal(got, want) {
					t.Errorf("%s text %d limit %d: reused splitter gave %q, Split %q", d, i, limit, got, want)
				}
			}
		}
	}
}

// TestSplitterConcurrent: one Splitter shared by many goroutines (the
// gateway shares one per dialect across replies) cuts like Split; the race
// detector checks that parses do not share state.
func TestSplitterConcurrent(t *testing.T) {
	sp := NewSplitter(DialectTelegram)
	md := "# Title\n\nsee [docs][d] and **bold** `code`\n\n- a\n- b\n\n```sh\necho hi\n```\n\n[d]: https://example.com\n\n" + strings.Repeat("More text here. ", 30)
	want := Split(md, DialectTelegram, 120)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if got := sp.Split(md, 120); !slices.Equal(got, want) {
					t.Errorf("concurrent split differs: %q", got)
					return
				}
			}
		}()
	}
	wg.Wait()
}
