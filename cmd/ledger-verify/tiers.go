package main

import (
	"fmt"
	"io"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
)

const tiersUsage = `Usage:
    ledger-verify tiers (--key VKEY | --key-file FILE | --trust FILE)...
                        --export EXPORT --index N [--write-checkpoint FILE]
                        [--json] DECLARATION

Verify the export file EXPORT, as the export command does, then say whether
entry N was minimized under the action declaration DECLARATION
(docs/declarations.md): its applied-tiers digest, and for a version 2
entry its action and action definition digest, recomputed from the file.
ledgerd serves the declarations of its catalog at /v1/actions/{action}.

Options:
    --export EXPORT       The export file holding the entry.
    --index N             The entry's index.
` + exportOptions + `
Exit status: 0 match, 1 the export does not verify or mismatch, 2 bad
usage or unreadable input.

Examples:
    $ ledger-verify tiers --key-file ledger.vkey --export export.ledger --index 4 make_payment.json
    match: entry 4 records the applied-tiers digest and action definition digest of this make_payment declaration
`

// runTiers verifies an export, then recomputes the applied-tiers digest
// of a declaration file and compares it with entry N's; for a version 2
// entry it compares the action and the action definition digest too.
func runTiers(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a, code := parseEntryArgs("tiers", tiersUsage, "declaration file", args, stdout, stderr)
	if a == nil {
		return code
	}
	data, err := keyflag.ReadFileLimit(a.file, 1<<20)
	if err == nil {
		err = checkLedgerdAnswer(a.file, data)
	}
	if err != nil {
		return inputError(stderr, "tiers", err)
	}
	d, err := declare.Parse(data)
	if err != nil {
		errorf(stderr, "tiers: the declaration is refused: %v", err)
		return exitFailed
	}
	tiers, err := d.TiersDigest()
	if err != nil {
		errorf(stderr, "tiers: %v", err)
		return exitFailed
	}
	definition, err := d.Digest()
	if err != nil {
		errorf(stderr, "tiers: %v", err)
		return exitFailed
	}
	e, code := a.r.verifiedEntry("tiers", a.exportFile, a.index, stdout, stderr)
	if e == nil {
		return code
	}
	var problems []string
	if e.Action != d.Action {
		problems = append(problems, fmt.Sprintf("the entry's action is not %s", termtext.Quote(d.Action)))
	}
	if !e.Tiers.Equal(tiers) {
		problems = append(problems, fmt.Sprintf("tiers_digest %s, the declaration's is %s", e.Tiers, tiers))
	}
	if e.Version() == entry.Version2 && !e.Definition.Equal(definition) {
		problems = append(problems, fmt.Sprintf("definition_digest %s, the declaration's is %s", e.Definition, definition))
	}
	if a.r.json {
		termtext.WriteJSON(stdout, map[string]any{
			"result": map[bool]string{true: "match", false: "mismatch"}[len(problems) == 0], "index": a.index,
			"action": d.Action, "tiers_digest": tiers, "definition_digest": definition,
			"entry_version": e.Version(), "problems": problems,
		})
	} else if len(problems) == 0 {
		what := "applied-tiers digest"
		if e.Version() == entry.Version2 {
			what += " and action definition digest"
		}
		termtext.PrintLine(stdout, "match: entry %d records the %s of this %s declaration", a.index, what, termtext.Quote(d.Action))
	} else {
		termtext.PrintLine(stdout, "mismatch: entry %d was not minimized under this declaration:", a.index)
		for _, p := range problems {
			termtext.PrintLine(stdout, "  %s", p)
		}
	}
	if len(problems) > 0 {
		return exitFailed
	}
	return exitOK
}
