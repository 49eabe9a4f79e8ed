package session

import (
	"bytes"
	"fmt"
	"time"

	"github.com/pibot/pibot/llm"
)

// Export renders the branch ending at leafID as a new session file, like
// pi's exportToJsonl: a header with the same session id and cwd and the
// timestamp now, then the branch's entries re-chained into one line of
// parents (the first entry becomes a root). Entries keep every member and
// their key order; only parentId changes.
func Export(t *Tree, leafID string, now time.Time) ([]byte, error) {
	branch, err := t.Branch(leafID)
	if err != nil {
		return nil, err
	}
	h := t.Header()
	hdr := Header{Type: TypeSession, Version: CurrentVersion, ID: h.ID, Timestamp: Timestamp(now), Cwd: h.Cwd}
	var buf bytes.Buffer
	hb, err := hdr.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("session: export %s: %w", t.path, err)
	}
	buf.Write(hb)
	buf.WriteByte('\n')
	parent := ""
	for _, e := range branch {
		buf.Write(rewriteObject(e.Raw, []llm.Field{fieldOf("parentId", jsonStringOrNull(parent))}, nil))
		buf.WriteByte('\n')
		parent = e.ID
	}
	return buf.Bytes(), nil
}
