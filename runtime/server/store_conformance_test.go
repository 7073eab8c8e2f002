package server_test

import (
	"testing"

	"github.com/go-resilient/resilient/runtime/server"
	"github.com/go-resilient/resilient/runtime/server/internal/storetest"
)

// TestAttackStoreRetriedOperations: the Store contract for an operation
// sent again after its answer was lost: a claim by the token that holds
// the key is Claimed again, by another token Pending; a Complete of a key
// already done with the same outcome succeeds, with another outcome it is
// ErrNotOwner.
func TestAttackStoreRetriedOperations(t *testing.T) {
	storetest.RetriedOperations(t, server.NewMemoryStore(10))
}
