package session

import (
	"encoding/json"
	"fmt"

	"github.com/pibot/pibot/llm"
)

// BranchCache keeps the decoded context of one branch between the runs of
// the one writer that grows it (a chat location), so that a run whose
// leaf only extends the previous one's decodes and copies just the entries
// added since instead of the whole history. Anything else (another Tree,
// a leaf off the branch, a compaction among the new entries) rebuilds the
// context as Tree.Context and Context.LLMMessages do. The zero value is
// empty. It is not safe for concurrent use.
type BranchCache struct {
	tree     *Tree
	leaf     *node // nil: nothing cached
	thinking string
	model    *ModelRef
	msgs     []llm.Message
	rebuilds int // how many contexts were built from the root
}

// BranchContext is what an agent takes from a branch: its LLM messages,
// thinking level and model (see Context).
type BranchContext struct {
	// Messages are shared with the cache and the Tree: the caller must
	// not change their elements (or the blocks they point to). It may
	// append to the slice: the spare capacity is the caller's until the
	// next call, which writes there again.
	Messages      []llm.Message
	ThinkingLevel string
	Model         *ModelRef
}

// maxExtend bounds the entries BranchCache walks up from a new leaf to
// find the cached one before it rebuilds instead.
const maxExtend = 256

// branchHeadroom is the spare capacity kept after the messages, so that an
// agent adopting them appends a run's prompt and answer without copying
// the history (agent.Headroom; session may not import agent).
const branchHeadroom = 4

// Context returns the context of t at leafID ("" = pi's default leaf).
func (c *BranchCache) Context(t *Tree, leafID string) (BranchContext, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	leaf, err := t.leafLocked(leafID)
	if err != nil {
		return BranchContext{}, err
	}
	br := t.bodies()
	defer br.close()
	if added, ok := c.since(t, leaf); ok {
		if err := c.extend(added, &br); err == nil {
			return c.context(), nil
		}
	}
	if err := c.rebuild(t, leaf, &br); err != nil {
		*c = BranchCache{rebuilds: c.rebuilds}
		return BranchContext{}, err
	}
	return c.context(), nil
}

// context is the cached context.
func (c *BranchCache) context() BranchContext {
	return BranchContext{Messages: c.msgs, ThinkingLevel: c.thinking, Model: c.model}
}

// since returns the entries from the cached leaf (exclusive) to leaf,
// root first, when leaf's branch is the cached one grown by entries that
// add messages at its end (no compaction, which rewrites the context).
func (c *BranchCache) since(t *Tree, leaf *node) ([]*node, bool) {
	if c.tree != t || c.leaf == nil || leaf == nil {
		return nil, false
	}
	var added []*node
	for n := leaf; n != c.leaf; n = n.parent {
		if n == nil || len(added) == maxExtend || n.typ == TypeCompaction {
			return nil, false
		}
		added = append(added, n)
	}
	for i, j := 0, len(added)-1; i < j; i, j = i+1, j-1 {
		added[i], added[j] = added[j], added[i]
	}
	return added, true
}

// extend appends the messages of added, which follow the cached leaf on
// its branch. On an error the cache is left as it was before.
func (c *BranchCache) extend(added []*node, br *bodyReader) error {
	msgs, thinking, model := c.msgs, c.thinking, c.model
	more := 0 // at most this many messages are appended
	for _, n := range added {
		switch n.typ {
		case TypeMessage, TypeCustomMessage, TypeBranchSummary:
			more++
		}
	}
	if len(msgs)+more+branchHeadroom > cap(msgs) {
		// Grown once, doubled: a conversation adds a few messages a
		// run, and each growth copies the whole history.
		msgs = make([]llm.Message, len(c.msgs), 2*len(c.msgs)+more+branchHeadroom)
		copy(msgs, c.msgs)
	}
	var err error
	for _, n := range added {
		thinking, model = settings(n, thinking, model)
		appendMessage(0, n, func(k int, derived []byte) {
			if err == nil {
				msgs, err = appendDecoded(msgs, n, k, derived, br)
			}
		})
	}
	if err != nil {
		return err
	}
	c.msgs, c.thinking, c.model = withHeadroom(msgs), thinking, model
	if len(added) > 0 {
		c.leaf = added[len(added)-1]
	}
	return nil
}

// rebuild builds the context at leaf from the root.
func (c *BranchCache) rebuild(t *Tree, leaf *node, br *bodyReader) error {
	path := t.pathLocked(leaf)
	c.rebuilds++
	c.tree, c.leaf = t, leaf
	c.thinking, c.model = "off", nil
	c.msgs = make([]llm.Message, 0, len(path)+branchHeadroom)
	if len(path) == 0 {
		return nil
	}
	var err error
	c.thinking, c.model = buildContext(path, func(k int, derived []byte) {
		if err == nil {
			var n *node
			if k >= 0 {
				n = path[k]
			}
			c.msgs, err = appendDecoded(c.msgs, n, k, derived, br)
		}
	})
	c.msgs = withHeadroom(c.msgs)
	return err
}

// appendDecoded appends the message buildContext emitted: n's stored
// message (k >= 0) or the derived one.
func appendDecoded(msgs []llm.Message, n *node, k int, derived []byte, br *bodyReader) ([]llm.Message, error) {
	msgs = append(msgs, llm.Message{}) // decoded in place: no copy on the heap
	dst := &msgs[len(msgs)-1]
	var err error
	if k < 0 {
		err = json.Unmarshal(derived, dst)
	} else {
		err = takeDecoded(dst, n, br)
	}
	if err != nil {
		return msgs[:len(msgs)-1], fmt.Errorf("session: context message %d: %w", len(msgs)-1, err)
	}
	return msgs, nil
}

// takeDecoded sets *dst to n's message. The decoded copy its append left
// on n moves to the cache, which holds it from now on: a live session
// keeps one decoded copy of each message, not two. Without one, the
// message is decoded from n's line and n is left without a copy.
func takeDecoded(dst *llm.Message, n *node, br *bodyReader) error {
	if d := n.decoded.Swap(nil); d != nil {
		*dst = *d
		return nil
	}
	raw := br.message(n)
	if raw == nil {
		return br.err
	}
	return json.Unmarshal(raw, dst)
}

// withHeadroom returns msgs with at least branchHeadroom spare capacity.
func withHeadroom(msgs []llm.Message) []llm.Message {
	if cap(msgs)-len(msgs) >= branchHeadroom {
		return msgs
	}
	grown := make([]llm.Message, len(msgs), 2*len(msgs)+branchHeadroom)
	copy(grown, msgs)
	return grown
}
