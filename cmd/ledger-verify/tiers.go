package main

import (
	"fmt"
	"io"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
)

// runTiers verifies an export, then recomputes the applied-tiers digest
// of a declaration file and compares it with entry N's; for a version 2
// entry it compares the action and the action definition digest too.
func runTiers(args []string, stdout, stderr io.Writer) int {
	a, code := parseEntryArgs("tiers", "declaration file", args, stderr)
	if a == nil {
		return code
	}
	data, err := readFileLimit(a.file, 1<<20)
	if err != nil {
		errorf(stderr, "tiers: %v", err)
		return exitUsage
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
		problems = append(problems, fmt.Sprintf("the entry's action is not %s", quote(d.Action)))
	}
	if !e.Tiers.Equal(tiers) {
		problems = append(problems, fmt.Sprintf("tiers_digest %s, the declaration's is %s", e.Tiers, tiers))
	}
	if e.Version() == entry.Version2 && !e.Definition.Equal(definition) {
		problems = append(problems, fmt.Sprintf("definition_digest %s, the declaration's is %s", e.Definition, definition))
	}
	if a.r.json {
		writeJSON(stdout, map[string]any{
			"result": map[bool]string{true: "match", false: "mismatch"}[len(problems) == 0], "index": a.index,
			"action": d.Action, "tiers_digest": tiers, "definition_digest": definition,
			"entry_version": e.Version(), "problems": problems,
		})
	} else if len(problems) == 0 {
		what := "applied-tiers digest"
		if e.Version() == entry.Version2 {
			what += " and action definition digest"
		}
		printLine(stdout, "match: entry %d records the %s of this %s declaration", a.index, what, quote(d.Action))
	} else {
		printLine(stdout, "mismatch: entry %d was not minimized under this declaration:", a.index)
		for _, p := range problems {
			printLine(stdout, "  %s", p)
		}
	}
	if len(problems) > 0 {
		return exitFailed
	}
	return exitOK
}
