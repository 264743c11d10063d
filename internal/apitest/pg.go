package apitest

import (
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/storage/postgres"
)

// PGStore opens a store on a new database of the shared test server,
// holding the lease.
func PGStore(t testing.TB) (*postgres.Store, string) {
	t.Helper()
	url := pgtest.Shared(t).NewDatabase(t)
	s, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.AcquireLease(t.Context(), "test", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	return s, url
}
