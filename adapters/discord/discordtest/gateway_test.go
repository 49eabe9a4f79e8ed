package discordtest

import (
	"runtime"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// InvalidateSession may run while the gateway answers an IDENTIFY: the
// READY must take the new session id under the gateway's lock. (It read
// it unlocked, a data race -race reported now and then in the adapter's
// TestIdentifyBackoff.) Each round invalidates the session the moment the
// IDENTIFY is counted, while the gateway builds its READY.
func TestInvalidateWhileIdentifying(t *testing.T) {
	s := New("tok")
	t.Cleanup(s.Close)
	url := "ws" + strings.TrimPrefix(s.URL, "http") + "/gateway"
	for range 200 {
		c, _, err := websocket.DefaultDialer.DialContext(t.Context(), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		var hello map[string]any
		if err := c.ReadJSON(&hello); err != nil {
			t.Fatal(err)
		}
		n := s.Identifies()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for s.Identifies() == n {
				runtime.Gosched()
			}
			for range 3 {
				s.InvalidateSession()
			}
		}()
		if err := c.WriteJSON(map[string]any{"op": 2, "d": map[string]any{"token": "Bot tok", "intents": 0}}); err != nil {
			t.Fatal(err)
		}
		<-done
		_ = c.Close()
	}
}
