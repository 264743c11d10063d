package main

import (
	"os"
	"testing"
)

// soakRounds is how many times a kill-and-restart test (TestDaemonKill9,
// TestClusterFailover) kills its ledgerd: quick by default, so that
// go test ./... stays within minutes on a loaded 2-core machine (each
// round restarts processes and waits for their recovery in real time),
// and full with LEDGER_SOAK=1, the soak the README describes:
//
//	LEDGER_SOAK=1 LEDGER_CI=1 go test -run 'Kill9|ClusterFailover' ./cmd/ledgerd/
func soakRounds(t *testing.T, quick, full int) int {
	t.Helper()
	if os.Getenv("LEDGER_SOAK") == "1" {
		return full
	}
	t.Logf("%d rounds of %d (LEDGER_SOAK=1 runs them all)", quick, full)
	return quick
}
