package config_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The config is read by ledgerd and by its commands alike: it imports no
// part of ledgerd (cmd, server, cluster, witness), neither the ledger nor
// a store, so that reading a config file opens nothing.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/decisionledger/ledger/config").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "github.com/decisionledger/ledger/ledger",
			strings.HasPrefix(dep, "github.com/decisionledger/ledger/storage"),
			strings.HasPrefix(dep, "github.com/decisionledger/ledger/cmd"),
			strings.HasPrefix(dep, "github.com/decisionledger/ledger/server"),
			strings.HasPrefix(dep, "github.com/decisionledger/ledger/cluster"),
			strings.HasPrefix(dep, "github.com/decisionledger/ledger/witness"),
			strings.Contains(dep, "badger"), strings.Contains(dep, "pgxpool"):
			t.Errorf("config depends on %s", dep)
		}
	}
}
