package cluster

import "github.com/pibot/pibot/internal/tokenbucket"

// The embedded stores carry the contract (contract.go); the gateway finds
// the abilities by type assertion, so these guards make losing one a
// compile error instead of a silent downgrade.
var (
	_ Inbox          = (*LocalInbox)(nil)
	_ Consumer       = (*LocalInbox)(nil)
	_ Peeker         = (*LocalInbox)(nil)
	_ Leaver         = (*LocalInbox)(nil)
	_ Beginner       = (*LocalInbox)(nil)
	_ Quarantiner    = (*LocalInbox)(nil)
	_ Syncer         = (*LocalInbox)(nil)
	_ Dedupe         = (*LocalDedupe)(nil)
	_ Budget         = (*LocalBudget)(nil)
	_ Index          = (*LocalIndex)(nil)
	_ Locker         = (*LocalLocker)(nil)
	_ PermanentLease = (*localLease)(nil)

	// The adapters' outbound pacing in this process.
	_ tokenbucket.Rates = (*Rates)(nil)
)
