package session

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"time"
)

// NewSessionID returns a random UUIDv7 (RFC 9562): 48 bits of Unix
// milliseconds, version 7, variant 10, the rest random.
func NewSessionID(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥1.24)
	ms := uint64(now.UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newEntryID returns 8 lowercase hex chars not reported as taken by exists.
// Like pi, it falls back to a longer id after 100 collisions.
func newEntryID(exists func(string) bool) string {
	var b [16]byte
	for range 100 {
		_, _ = rand.Read(b[:4])
		id := hex.EncodeToString(b[:4])
		if !exists(id) {
			return id
		}
	}
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Timestamp formats t like JavaScript's Date.toISOString.
func Timestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// FileName returns pi's file name for a session: the header timestamp with
// ':' and '.' replaced by '-', an underscore and the session id.
func FileName(timestamp, id string) string {
	ts := strings.NewReplacer(":", "-", ".", "-").Replace(timestamp)
	return ts + "_" + id + ".jsonl"
}

// ParseFileName is FileName's inverse: the header timestamp and session id
// of the file named name (a base name or a path). It reports false for a
// name FileName does not make.
func ParseFileName(name string) (timestamp, id string, ok bool) {
	base, ok := strings.CutSuffix(filepath.Base(name), ".jsonl")
	if !ok {
		return "", "", false
	}
	ts, id, ok := strings.Cut(base, "_")
	// 2006-01-02T15-04-05-000Z: the time's ':' and '.' became '-'.
	if !ok || id == "" || len(ts) != len("2006-01-02T15-04-05-000Z") || ts[10] != 'T' {
		return "", "", false
	}
	timestamp = ts[:13] + ":" + ts[14:16] + ":" + ts[17:19] + "." + ts[20:]
	if t, err := time.Parse("2006-01-02T15:04:05.000Z", timestamp); err != nil || Timestamp(t) != timestamp {
		return "", "", false
	}
	return timestamp, id, true
}

// Dir returns the directory for a space (a location or workspace name)
// under dataDir: <dataDir>/sessions/<sanitized space>. Path separators, dots
// at the start and characters outside [A-Za-z0-9._-] become '-', so a space
// name can never escape dataDir.
func Dir(dataDir, space string) string {
	var b strings.Builder
	for _, r := range space {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.TrimLeft(b.String(), ".")
	if s == "" {
		s = "default"
	}
	return filepath.Join(dataDir, "sessions", s)
}

// parseMillis converts an ISO timestamp to Unix milliseconds like
// JavaScript's Date.parse; ok is false when it does not parse (NaN).
func parseMillis(ts string) (int64, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04Z07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, ts); err == nil {
			return t.UnixMilli(), true
		}
	}
	return 0, false
}
