package main

import (
	"strings"

	"github.com/decisionledger/ledger/internal/cliusage"
)

var usageText = cliusage.Text{Program: "ledgerd", Usage: usage, Default: "serve"}

// commandUsage is what "ledgerd COMMAND --help" prints for the flag set
// named command ("token add", "check"): that command's part of usage.
func commandUsage(command string) string {
	word, _, _ := strings.Cut(command, " ")
	if word == "check" {
		word = "fsck"
	}
	return usageText.Command(word)
}
