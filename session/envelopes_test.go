package session_test

import (
	"reflect"
	"testing"

	"github.com/pibot/pibot/session"
)

// TestEnvelopes: every entry in file order, as Entries has them but for
// the messages, which come as envelopes: a lazily loaded tree reads no
// line for the walk.
func TestEnvelopes(t *testing.T) {
	path := generatedFile(t, 2000, 100)
	eager, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eager.Close()
	cs := &countingStorage{}
	lazy, err := session.Open(cs, path, session.Options{ReadOnly: true, Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lazy.Close()
	want := eager.Tree().Entries()
	for _, tc := range []struct {
		name string
		tree *session.Tree
	}{{"eager", eager.Tree()}, {"lazy", lazy.Tree()}} {
		t.Run(tc.name, func(t *testing.T) {
			read := cs.read.Load()
			var got []session.Entry
			for e := range tc.tree.Envelopes() {
				got = append(got, e)
			}
			if n := cs.read.Load() - read; n != 0 {
				t.Errorf("the walk read %d bytes", n)
			}
			if len(got) != len(want) {
				t.Fatalf("%d envelopes, %d entries", len(got), len(want))
			}
			for i, g := range got {
				w := want[i]
				if w.Type == session.TypeMessage {
					if g.Message != nil {
						t.Fatalf("entry %d: message decoded", i)
					}
					w.Message, w.Raw, g.Raw = nil, nil, nil
				}
				if !reflect.DeepEqual(g, w) {
					t.Fatalf("entry %d: %+v, want %+v", i, g, w)
				}
			}
			n := 0
			for range tc.tree.Envelopes() {
				if n++; n == 3 {
					break
				}
			}
			if n != 3 {
				t.Fatalf("the walk went on after it was stopped: %d", n)
			}
		})
	}
}

// TestBranchTail: the last n entries of a branch are Branch's last n,
// decoded alike, eagerly and lazily loaded; a lazily loaded tree reads
// their lines only.
func TestBranchTail(t *testing.T) {
	path := generatedFile(t, 2000, 100)
	eager, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eager.Close()
	cs := &countingStorage{}
	lazy, err := session.Open(cs, path, session.Options{ReadOnly: true, Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lazy.Close()
	entries := eager.Tree().Entries()
	mid := entries[len(entries)/2].ID
	size := fileSize(t, path)
	for _, leaf := range []string{"", mid} {
		branch, err := eager.Tree().Branch(leaf)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{-1, 0, 1, 40, len(branch), len(branch) + 7} {
			want := branch[len(branch)-max(0, min(n, len(branch))):]
			for _, tc := range []struct {
				name string
				tree *session.Tree
			}{{"eager", eager.Tree()}, {"lazy", lazy.Tree()}} {
				read := cs.read.Load()
				got, err := tc.tree.BranchTail(leaf, n)
				if err != nil {
					t.Fatalf("%s, leaf %q, n %d: %v", tc.name, leaf, n, err)
				}
				if len(got) != len(want) || len(want) > 0 && !reflect.DeepEqual(got, want) {
					t.Fatalf("%s, leaf %q, n %d: %d entries differ from the branch's last %d", tc.name, leaf, n, len(got), len(want))
				}
				if r := cs.read.Load() - read; n == 40 && r > size/10 {
					t.Fatalf("%s, leaf %q: the last 40 entries read %d bytes of the %d-byte file", tc.name, leaf, r, size)
				}
			}
		}
	}
	if _, err := lazy.Tree().BranchTail("no-such-entry", 3); err == nil {
		t.Fatal("the tail of an unknown entry's branch: no error")
	}
}
