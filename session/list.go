package session

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pibot/pibot/llm"
)

// Info summarises one session file for listings (like pi's SessionInfo).
type Info struct {
	Path          string    `json:"path"`
	ID            string    `json:"id"`
	Cwd           string    `json:"cwd"`
	Name          string    `json:"name,omitempty"`
	ParentSession string    `json:"parentSession,omitempty"`
	Created       time.Time `json:"created"`
	Modified      time.Time `json:"modified"`
	MessageCount  int       `json:"messageCount"`
	FirstMessage  string    `json:"firstMessage"`
}

// List returns the sessions in dir on the local file system, most
// recently modified first. Files that are not sessions are skipped.
func List(dir string) ([]Info, error) { return ListStorage(FileStorage{}, dir) }

// ListStorage is List on any storage.
func ListStorage(storage Storage, dir string) ([]Info, error) {
	files, err := storage.List(dir)
	if err != nil {
		return nil, fmt.Errorf("session: list %s: %w", dir, err)
	}
	var out []Info
	for _, f := range files {
		data, err := storage.ReadFile(f.Path)
		if err != nil {
			continue
		}
		p, err := parseData(data, f.Path)
		if err != nil {
			continue
		}
		out = append(out, info(p, f))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Modified.After(out[j].Modified) })
	return out, nil
}

func info(p *parsed, f FileInfo) Info {
	in := Info{Path: f.Path, ID: p.header.ID, Cwd: p.header.Cwd, ParentSession: p.header.ParentSession}
	if ms, ok := parseMillis(p.header.Timestamp); ok {
		in.Created = time.UnixMilli(ms).UTC()
	}
	var last int64 = -1
	for _, n := range p.nodes {
		switch n.typ {
		case TypeSessionInfo:
			e, err := decodeEntry(n.raw)
			in.Name = ""
			if err == nil && e.Name != nil {
				in.Name = strings.TrimSpace(*e.Name)
			}
		case TypeMessage:
			in.MessageCount++
			if n.role != string(llm.RoleUser) && n.role != string(llm.RoleAssistant) {
				continue
			}
			var m struct {
				Timestamp *float64 `json:"timestamp"`
			}
			raw := n.raw[n.msg[0]:n.msg[1]]
			_ = json.Unmarshal(raw, &m)
			ts := int64(-1)
			if m.Timestamp != nil {
				ts = int64(*m.Timestamp)
			} else if ms, ok := parseMillis(n.ts); ok {
				ts = ms
			}
			last = max(last, ts)
			if in.FirstMessage == "" && n.role == string(llm.RoleUser) {
				var msg llm.Message
				if json.Unmarshal(raw, &msg) == nil {
					in.FirstMessage = msg.Text()
				}
			}
		}
	}
	if in.FirstMessage == "" {
		in.FirstMessage = "(no messages)"
	}
	switch {
	case last >= 0:
		in.Modified = time.UnixMilli(last).UTC()
	case !in.Created.IsZero():
		in.Modified = in.Created
	default:
		in.Modified = f.ModTime
	}
	return in
}
