package main

import (
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/cliusage"
)

// Each command's --help is its own part of the usage: its usage lines,
// its paragraph, an Options paragraph for every flag its usage lines name,
// the exit statuses; and no other command's usage line.
func TestCommandUsage(t *testing.T) {
	commands := map[string]string{ // flag set name → its word in the usage
		"serve": "serve", "init": "init", "token add": "token", "token rotate": "token",
		"approver add": "approver", "approver remove": "approver", "fsck": "fsck", "check": "fsck",
		"keygen": "keygen", "key rotate": "key",
		"config set": "config", "config unset": "config", "config get": "config", "config show": "config",
	}
	for name, word := range commands {
		help := commandUsage(name)
		sections := usageText.Sections()
		var own []string
		for _, line := range sections["Usage"] {
			if usageText.UsageLineOf(line, word) {
				own = append(own, line)
			} else if strings.Contains(help, line) {
				t.Errorf("%s --help holds another command's usage line %q", name, line)
			}
		}
		if len(own) == 0 || !strings.HasPrefix(help, "Usage:\n") || !strings.Contains(help, "\nExit status:\n") {
			t.Errorf("%s --help:\n%s", name, help)
		}
		if p := cliusage.Paragraph(sections["Commands"], word); len(p) == 0 || !strings.Contains(help, p[0]) {
			t.Errorf("%s --help lacks its paragraph under Commands", name)
		}
		for _, line := range own {
			for _, f := range cliusage.FlagPattern.FindAllString(line, -1) {
				if !strings.Contains(help, "\n    "+f+" ") {
					t.Errorf("%s --help: its usage names %s, which has no paragraph under Options", name, f)
				}
			}
		}
	}
}
