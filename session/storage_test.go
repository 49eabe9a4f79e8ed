package session_test

import (
	"path/filepath"
	"testing"

	"github.com/pibot/pibot/session"
	"github.com/pibot/pibot/session/sessiontest"
)

func TestConformanceFile(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) (session.Storage, string) {
		return session.FileStorage{}, filepath.Join(t.TempDir(), "s")
	})
}

func TestConformanceMemory(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) (session.Storage, string) {
		return session.NewMemStorage(), "/data/s"
	})
}
