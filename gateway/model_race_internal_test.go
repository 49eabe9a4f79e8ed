package gateway

import (
	"sync"
	"testing"

	"github.com/pibot/pibot/chat"
)

// TestContextReadsTheModelUnderTheLock is the regression test for a data
// race: a run reads its location's context (contextFor, branchContext)
// while a /model command sets the location's model (setModel) on the
// owner's goroutine. Under -race the unlocked read failed.
func TestContextReadsTheModelUnderTheLock(t *testing.T) {
	g := newBareGateway(t)
	conv := chat.ConvRef{Platform: "test", Channel: "c", DM: true}
	o, loc, err := g.sessions.locate(t.Context(), chat.Inbound{Conv: conv})
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 200 {
			o.setModel(loc, []string{"demo/a", "demo/b"}[i%2])
		}
	}()
	for range 200 {
		if _, _, _, err := o.contextFor(loc); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := o.branchContext(loc); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	o.setModel(loc, "demo/b")
	if _, _, ref, _ := o.contextFor(loc); ref != "demo/b" {
		t.Errorf("context's model = %q after /model demo/b", ref)
	}
}
