package daemon

import (
	"os"
	"testing"

	"github.com/decisionledger/ledger/internal/pgtest"
)

func TestMain(m *testing.M) {
	os.Exit(pgtest.Run(m)) // stops the PostgreSQL server the tests started, if any
}
