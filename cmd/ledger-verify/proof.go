package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
)

const proofUsage = `Usage:
    ledger-verify proof (--key VKEY | --key-file FILE | --trust FILE)...
                        [--params CANDIDATE] [--write-checkpoint FILE] [--json]
                        TLOG-PROOF

Verify a C2SP tlog-proof@v1 file holding one entry (docs/export.md §4):
the checkpoint, the entry's encoding, key and signature, and its inclusion
in the checkpoint's tree. ledgerd serves one at /v1/proofs/{index}.

Options:
` + keyOptions + `    --params CANDIDATE    Also compare candidate parameters (a JSON file) with
                          the entry's commitment: match, mismatch or refused.
    --json                Machine-readable output on standard output.
    --write-checkpoint FILE
                          After the proof verifies, write its signed
                          checkpoint to FILE (a temporary file, synced,
                          renamed over FILE): the trusted checkpoint of
                          the next export (whatever --params finds).

Exit status: 0 verified (with --params: and match), 1 verification
failed, mismatch or refused, 2 bad usage or unreadable input.

Examples:
    $ ledger-verify proof --key-file ledger.vkey entry-7.tlog-proof
    verified: entry 7 of ledger.example.com/log is in the tree of size 300
      make_payment: allow by mediator-1 for agent-1
    $ ledger-verify proof --key-file ledger.vkey --params params-7.json entry-7.tlog-proof
`

func runProof(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("proof", flag.ContinueOnError)
	var keys keyFlags
	keys.register(fs)
	paramsFile := fs.String("params", "", "")
	jsonOut := fs.Bool("json", false, "")
	checkpointOut := fs.String("write-checkpoint", "", "")
	files, code, ok := parseFlags(fs, proofUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) != 1 {
		return usageError(stderr, "proof", "takes exactly one tlog-proof file")
	}
	key, err := keys.load()
	if err != nil {
		errorf(stderr, "proof: %v", err)
		return exitUsage
	}
	b, err := keyflag.ReadFileLimit(files[0], 1<<20)
	if err == nil {
		err = checkLedgerdAnswer(files[0], b)
	}
	if err != nil {
		return inputError(stderr, "proof", err)
	}
	var candidate []byte
	if *paramsFile != "" {
		if candidate, err = keyflag.ReadFileLimit(*paramsFile, commit.DefaultMaxBytes); err != nil {
			errorf(stderr, "proof: %v", err)
			return exitUsage
		}
	}
	e, cp, err := verify.VerifyTlogProof(b, key)
	if err != nil {
		return reportFailures(stdout, stderr, err, *jsonOut)
	}
	if *checkpointOut != "" {
		// The checkpoint VerifyTlogProof verified, verbatim.
		p, err := verify.ParseTlogProof(b)
		if err != nil { // unreachable: verified above
			return reportFailures(stdout, stderr, err, *jsonOut)
		}
		if code, ok := writeCheckpointFile("proof", *checkpointOut, p.Checkpoint, stderr); !ok {
			return code
		}
	}
	out := map[string]any{"result": "verified", "index": e.Index, "origin": cp.Origin, "tree_size": cp.Size,
		"action": e.Action, "decision": e.Decision, "params_digest": e.Params.DigestText()}
	status := exitOK
	var paramsLine string
	if candidate != nil {
		result, perr := verify.Params(e, candidate)
		out["params"] = result
		var de *commit.DomainError
		if errors.As(perr, &de) {
			out["refusal"] = refusalJSON(de)
		}
		switch result {
		case verify.Match:
			paramsLine = "  params: match: the entry committed to exactly these parameters"
		case verify.Mismatch:
			paramsLine = "  params: mismatch: the entry committed to other parameters"
			status = exitFailed
		default:
			paramsLine = fmt.Sprintf("  params: refused: %v", perr)
			status = exitFailed
		}
	}
	if *jsonOut {
		termtext.WriteJSON(stdout, out)
		return status
	}
	termtext.PrintLine(stdout, "verified: entry %d of %s is in the tree of size %d", e.Index, termtext.Quote(cp.Origin), cp.Size)
	termtext.PrintLine(stdout, "  %s: %s by %s for %s", termtext.Quote(e.Action), termtext.Quote(string(e.Decision)), termtext.Quote(e.Mediator), termtext.Quote(e.Principal))
	if paramsLine != "" {
		termtext.PrintLine(stdout, "%s", paramsLine)
	}
	return status
}
