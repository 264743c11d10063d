package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/cliusage"
)

// TestCommandHelp runs "ledger-mcp COMMAND --help" through the binary:
// exit 0, that command's usage lines and paragraph only, a paragraph for
// every option its usage names, and nothing done (token --help makes no
// token for a principal named "--help").
func TestCommandHelp(t *testing.T) {
	binaries(t)
	sections := usageText.Sections()
	for _, word := range []string{"serve", "check", "declare", "token", "version"} {
		for _, ask := range []string{"--help", "-h"} {
			cmd := exec.Command(bins.ledgerMCP, word, ask)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil || stderr.Len() != 0 {
				t.Fatalf("%s %s: %v, stderr %q", word, ask, err, stderr.String())
			}
			help := string(out)
			if help != usageText.Command(word) {
				t.Errorf("%s %s printed %q, not its part of the usage", word, ask, help)
			}
			if p := cliusage.Paragraph(sections["Commands"], word); len(p) == 0 || !strings.Contains(help, p[0]) {
				t.Errorf("%s --help lacks its paragraph under Commands:\n%s", word, help)
			}
			for _, line := range sections["Usage"] {
				own := usageText.UsageLineOf(line, word)
				if !own && strings.Contains(help, line) {
					t.Errorf("%s --help holds another command's usage line %q", word, line)
				}
				if !own {
					continue
				}
				for _, f := range cliusage.FlagPattern.FindAllString(line, -1) {
					if !strings.Contains(help, "\n    "+f+" ") {
						t.Errorf("%s --help: its usage names %s, which has no paragraph under Options", word, f)
					}
				}
			}
		}
	}
	// A token for a principal that happens to look like a flag is bad
	// usage, not a token.
	cmd := exec.Command(bins.ledgerMCP, "token", "-x")
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || len(out) != 0 {
		t.Errorf("token -x: %v, stdout %q; want exit 2 and no token", err, out)
	}
}
