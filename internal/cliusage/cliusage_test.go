package cliusage

import (
	"strings"
	"testing"
)

const testUsage = `Usage:
    prog [serve] [--data DIR]
    prog check [--data DIR]
    prog token add NAME

Commands:
    serve   Serve.
    check   Check the store.
    token   Manage tokens.

Options:
    --data DIR   The data directory.

Environment:
    MEMLIMIT     The memory limit.
    PROG_LINE    check's progress line, on a
                 terminal only.

Exit status:
    0 success, 1 failure.
`

// The default command shows every variable; another, those whose entry
// names it, whole; a command no entry names, no Environment section.
func TestCommandEnvironment(t *testing.T) {
	u := Text{Program: "prog", Usage: testUsage, Default: "serve"}
	for word, want := range map[string]string{
		"serve": "\nEnvironment:\n    MEMLIMIT     The memory limit.\n    PROG_LINE    check's progress line, on a\n                 terminal only.\n\nExit status:",
		"check": "\nEnvironment:\n    PROG_LINE    check's progress line, on a\n                 terminal only.\n\nExit status:",
		"token": "\n\nExit status:",
	} {
		got := u.Command(word)
		if !strings.Contains(got, want) || word == "token" && strings.Contains(got, "Environment") {
			t.Errorf("%s --help:\n%s\nwant it to hold %q", word, got, want)
		}
	}
}
