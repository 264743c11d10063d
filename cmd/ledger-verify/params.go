package main

import (
	"errors"
	"io"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
)

const paramsUsage = `Usage:
    ledger-verify params (--key VKEY | --key-file FILE | --trust FILE)...
                         --export EXPORT --index N [--allow-non-integer]
                         [--json] CANDIDATE

Verify the export file EXPORT, as the export command does, then say
whether the candidate parameters (a JSON file) are exactly those entry N
committed to (docs/commitment.md): match, mismatch, or refused (outside
the strict input domain).

Options:
    --export EXPORT       The export file holding the entry.
    --index N             The entry's index.
    --allow-non-integer   Admit numbers with a fractional part, committed to
                          in their RFC 8785 form, as a deployment that admits
                          them does (ledger-mcp's allow_non_integer).
` + exportOptions + `
Exit status: 0 match, 1 the export does not verify, mismatch or refused,
2 bad usage or unreadable input.

Examples:
    $ ledger-verify params --key-file ledger.vkey --export export.ledger --index 17 params.json
    match: entry 17 committed to exactly these parameters
`

func runParams(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a, code := parseEntryArgs("params", paramsUsage, "candidate parameter file", args, stdout, stderr)
	if a == nil {
		return code
	}
	r, index := &a.r, a.index
	candidate, err := keyflag.ReadFileLimit(a.file, commit.DefaultMaxBytes)
	if err != nil {
		errorf(stderr, "params: %v", err)
		return exitUsage
	}
	e, code := r.verifiedEntry("params", a.exportFile, index, stdout, stderr)
	if e == nil {
		return code
	}
	result, err := verify.ParamsIn(commit.Domain{AllowNonInteger: a.allowNonInteger}, e, candidate)
	if r.json {
		out := map[string]any{"result": result, "index": index, "params_digest": e.Params.DigestText()}
		var de *commit.DomainError
		if errors.As(err, &de) {
			out["refusal"] = refusalJSON(de)
		}
		termtext.WriteJSON(stdout, out)
	} else {
		switch result {
		case verify.Match:
			termtext.PrintLine(stdout, "match: entry %d committed to exactly these parameters", index)
		case verify.Mismatch:
			termtext.PrintLine(stdout, "mismatch: entry %d committed to other parameters (%s, %d bytes)", index, e.Params.DigestText(), e.Params.Size)
		case verify.Refused:
			termtext.PrintLine(stdout, "refused: the candidate is outside the strict input domain: %v", err)
		}
	}
	if result != verify.Match {
		return exitFailed
	}
	return exitOK
}
