package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
)

const paramsUsage = `Usage:
    ledger-verify params (--key VKEY | --key-file FILE | --trust FILE)...
                         --export EXPORT [--index N] [--allow-non-integer]
                         [--write-checkpoint FILE] [--json] CANDIDATE

Verify the export file EXPORT, as the export command does, then say
whether the candidate parameters (a JSON file) are exactly those entry N
committed to (docs/commitment.md): match, mismatch, or refused (outside
the strict input domain).

Without --index, list the entries of the export that committed to the
candidate parameters: decisions and consumptions with a version 1 digest
(sha256:). An entry with a hiding commitment (v2:sha256:) cannot be
searched by parameters: its digest is salted per field, so only its
disclosure opens it. Such entries are counted and reported as not
searched; check one with --index N.

An entry with a hiding commitment (a v2:sha256: digest, docs/commitment.md
§7) is checked with its disclosure file, every field opened, instead of
bare parameters; CANDIDATE may also be a directory of disclosure files
named by digest (ledger-mcp's "disclosures"). Without the openings (the
file erased, or never kept) the result is unverifiable: the parameters
can no longer be checked, which is not a mismatch.

Options:
    --export EXPORT       The export file holding the entry.
    --index N             The entry's index. Without it, every entry is
                          searched (version 1 commitments only).
    --allow-non-integer   Admit numbers with a fractional part, committed to
                          in their RFC 8785 form, as a deployment that admits
                          them does (ledger-mcp's allow_non_integer).
` + exportOptions + `
Output without --index: "match: N entries of entries S to E committed
to exactly these parameters (DIGEST, SIZE bytes): I, J, ...", or
"mismatch: ..." or "refused: ...", and, when the export holds entries
with a hiding commitment, "  not searched: N entries with a hiding
commitment ...". With --json: {"result", "start", "end", "indexes":
[...], "hiding_not_searched", "params_digest", "params_size"} (or
"refusal" instead of the digest).

Exit status: 0 match (without --index: at least one entry), 1 the export
does not verify, mismatch, refused or unverifiable, 2 bad usage or
unreadable input.

Examples:
    $ ledger-verify params --key-file ledger.vkey --export export.ledger --index 17 params.json
    match: entry 17 committed to exactly these parameters
    $ ledger-verify params --key-file ledger.vkey --export export.ledger params.json
    match: 2 entries of entries 0 to 999 committed to exactly these parameters (sha256:..., 56 bytes): 17, 18
      not searched: 12 entries with a hiding commitment (v2:sha256:), which cannot be searched by parameters: check one with --index N and its disclosure
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
	if a.search {
		if isDir {
			return usageError(stderr, "params", "without --index, give the candidate parameters (a JSON file), not a directory of disclosures: a hiding commitment is checked one entry at a time")
		}
		return searchParams(a, domain, candidate, stdout, stderr)
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

// searchParams is params without --index: verify the export, then list
// the entries that committed to the candidate parameters. Only version 1
// commitments can be searched: a hiding commitment (v2:sha256:) is salted
// per field, so that the parameters alone cannot be compared with it;
// the entries that carry one are counted and said to be unsearched.
func searchParams(a *entryArgs, domain commit.Domain, candidate []byte, stdout, stderr io.Writer) int {
	r := &a.r
	c, cerr := domain.Params(candidate)
	var indexes []uint64
	var hidden uint64
	report, verr, uerr := r.verifyParsed(a.exportFile, stderr, func(i uint64, e *entry.Entry, _ commit.Digest, _ []byte) {
		switch {
		case !hasParams(e):
		case e.Params.Hiding:
			hidden++
		case cerr == nil && e.Params.Equal(c):
			indexes = append(indexes, i)
		}
	})
	if uerr != nil {
		return inputError(stderr, "params", uerr)
	}
	if verr != nil {
		return reportFailures(stdout, stderr, verr, r.json)
	}
	if code, ok := r.writeCheckpoint("params", report, stderr); !ok {
		return code
	}
	result := verify.Match
	switch {
	case cerr != nil:
		result = verify.Refused
	case len(indexes) == 0:
		result = verify.Mismatch
	}
	where := fmt.Sprintf("no entries (range %d to %d)", report.Start, report.End)
	if report.End > report.Start {
		where = fmt.Sprintf("entries %d to %d", report.Start, report.End-1)
	}
	if r.json {
		out := map[string]any{"result": result, "start": report.Start, "end": report.End,
			"indexes": nonNilIndexes(indexes), "hiding_not_searched": hidden}
		var de *commit.DomainError
		if errors.As(cerr, &de) {
			out["refusal"] = refusalJSON(de)
		} else if cerr == nil {
			out["params_digest"], out["params_size"] = c.DigestText(), c.Size
		}
		termtext.WriteJSON(stdout, out)
	} else {
		switch result {
		case verify.Match:
			list := make([]string, len(indexes))
			for i, x := range indexes {
				list[i] = strconv.FormatUint(x, 10)
			}
			termtext.PrintLine(stdout, "match: %s of %s committed to exactly these parameters (%s, %d bytes): %s",
				termtext.Count(uint64(len(indexes)), "entry", "entries"), where, c.DigestText(), c.Size, strings.Join(list, ", "))
		case verify.Mismatch:
			termtext.PrintLine(stdout, "mismatch: no version 1 commitment of %s is to these parameters (%s, %d bytes)", where, c.DigestText(), c.Size)
		case verify.Refused:
			termtext.PrintLine(stdout, "refused: the candidate is outside the strict input domain: %v", cerr)
		}
		if hidden > 0 {
			termtext.PrintLine(stdout, "  not searched: %s with a hiding commitment (v2:sha256:), which cannot be searched by parameters: check one with --index N and its disclosure", termtext.Count(hidden, "entry", "entries"))
		}
	}
	if result != verify.Match {
		return exitFailed
	}
	return exitOK
}

func nonNilIndexes(s []uint64) []uint64 {
	if s == nil {
		return []uint64{}
	}
	return s
}
