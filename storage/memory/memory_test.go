package memory_test

import (
	"testing"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/storage/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (ledger.Store, func() ledger.Store) {
		s := memory.New()
		return s, func() ledger.Store {
			s.Close()
			s = s.Reopen()
			return s
		}
	})
}

func TestClosed(t *testing.T) {
	s := memory.New()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.State(t.Context()); err == nil {
		t.Errorf("State after Close succeeded")
	}
	b := ledger.Batch{Start: 0, Entries: [][]byte{[]byte("entry")}, LeafHashes: make([][ledger.HashSize]byte, 1)}
	if err := s.Commit(t.Context(), b); err == nil {
		t.Errorf("Commit after Close succeeded")
	}
}
