package mcpgate_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The gateway is a mediator: it reaches the ledger through package
// client, never by importing the ledger, a store or ledgerd.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/decisionledger/ledger/mcpgate").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "github.com/decisionledger/ledger/ledger",
			strings.HasPrefix(dep, "github.com/decisionledger/ledger/storage"),
			strings.HasPrefix(dep, "github.com/decisionledger/ledger/cmd"),
			strings.HasPrefix(dep, "github.com/decisionledger/ledger/server"),
			strings.Contains(dep, "badger"), strings.Contains(dep, "pgx"):
			t.Errorf("mcpgate depends on %s", dep)
		}
	}
}
