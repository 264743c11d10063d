package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

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

An entry with a hiding commitment (a v2:sha256: digest, docs/commitment.md
§7) is checked with its disclosure file, every field opened, instead of
bare parameters; CANDIDATE may also be a directory of disclosure files
named by digest (ledger-mcp's "disclosures"). Without the openings (the
file erased, or never kept) the result is unverifiable: the parameters
can no longer be checked, which is not a mismatch.

Options:
    --export EXPORT       The export file holding the entry.
    --index N             The entry's index.
    --allow-non-integer   Admit numbers with a fractional part, committed to
                          in their RFC 8785 form, as a deployment that admits
                          them does (ledger-mcp's allow_non_integer).
` + exportOptions + `
Exit status: 0 match, 1 the export does not verify, mismatch, refused or
unverifiable, 2 bad usage or unreadable input.

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
	domain := commit.Domain{AllowNonInteger: a.allowNonInteger}
	info, statErr := os.Stat(a.file)
	isDir := statErr == nil && info.IsDir()
	var candidate []byte
	if !isDir {
		var err error
		if candidate, err = keyflag.ReadFileLimit(a.file, 8*commit.DefaultMaxBytes); err != nil {
			errorf(stderr, "params: %v", err)
			return exitUsage
		}
	}
	e, code := r.verifiedEntry("params", a.exportFile, index, stdout, stderr)
	if e == nil {
		return code
	}
	var result verify.ParamsResult
	var err error
	var why string // for unverifiable
	switch {
	case e.Params.Hiding && isDir:
		name := filepath.Join(a.file, hex.EncodeToString(e.Params.Digest[:])+".json")
		switch b, rerr := keyflag.ReadFileLimit(name, 8*commit.DefaultMaxBytes); {
		case errors.Is(rerr, fs.ErrNotExist):
			result, why = verify.Unverifiable, fmt.Sprintf("no disclosure for entry %d in %s (erased, or never kept)", index, termtext.Quote(a.file))
		case rerr != nil:
			errorf(stderr, "params: %v", rerr)
			return exitUsage
		default:
			result, why, err = verify.ParamsDisclosed(domain, e, b)
		}
	case isDir:
		return usageError(stderr, "params", "entry %d carries a version 1 digest: give the candidate parameters, not a directory of disclosures", index)
	case e.Params.Hiding:
		result, why, err = verify.ParamsDisclosed(domain, e, candidate)
	default:
		result, err = verify.ParamsIn(domain, e, candidate)
	}
	if r.json {
		out := map[string]any{"result": result, "index": index, "params_digest": e.Params.DigestText()}
		var de *commit.DomainError
		var xe *commit.DisclosureError
		switch {
		case errors.As(err, &de):
			out["refusal"] = refusalJSON(de)
		case errors.As(err, &xe):
			ref := map[string]any{"code": string(xe.Kind), "pointer": xe.Pointer}
			if xe.Field != "" {
				ref["field"] = xe.Field
			}
			out["refusal"] = ref
		}
		if why != "" {
			out["reason"] = why
		}
		termtext.WriteJSON(stdout, out)
	} else {
		switch result {
		case verify.Match:
			termtext.PrintLine(stdout, "match: entry %d committed to exactly these parameters", index)
		case verify.Mismatch:
			termtext.PrintLine(stdout, "mismatch: entry %d committed to other parameters (%s, %d bytes)", index, e.Params.DigestText(), e.Params.Size)
		case verify.Refused:
			var xe *commit.DisclosureError
			if errors.As(err, &xe) {
				termtext.PrintLine(stdout, "refused: %s", discloseProblem(index, xe))
			} else {
				termtext.PrintLine(stdout, "refused: the candidate is outside the strict input domain: %v", err)
			}
		case verify.Unverifiable:
			termtext.PrintLine(stdout, "unverifiable: entry %d carries a hiding commitment, and %s: its parameters cannot be checked without their openings (this is not a mismatch)", index, why)
		}
	}
	if result != verify.Match {
		return exitFailed
	}
	return exitOK
}
