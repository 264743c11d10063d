// Command ledger-verify is the auditor's offline tool. It trusts nothing
// but what it is given on the command line.
//
// Usage:
//
//	ledger-verify export (--key VKEY | --key-file FILE) [--trusted CHECKPOINT] [--prev HASH] [--all] [--json] EXPORT
//	ledger-verify params (--key VKEY | --key-file FILE) --export EXPORT --index N [--json] CANDIDATE
//	ledger-verify proof  (--key VKEY | --key-file FILE) [--params CANDIDATE] [--json] TLOG-PROOF
//	ledger-verify tiers  (--key VKEY | --key-file FILE) --export EXPORT --index N [--json] DECLARATION
//	ledger-verify digest [--allow-non-integer] [--canonical] [--json] FILE
//
// export verifies an export file (docs/export.md); params and tiers verify
// one, then compare one entry with candidate parameters (docs/commitment.md)
// or with an action declaration (docs/declarations.md); proof verifies a
// C2SP tlog-proof file; digest prints a parameter commitment. The usage
// text (ledger-verify --help) describes each.
//
// Exit status: 0 verified (params, tiers: match), 1 verification failed
// (or mismatch, or refused input), 2 bad usage or unreadable input.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/decisionledger/ledger/commit"
)

const usage = `Usage:
    ledger-verify export (--key VKEY | --key-file FILE) [--trusted CHECKPOINT]
                         [--prev HASH] [--all] [--json] EXPORT
    ledger-verify params (--key VKEY | --key-file FILE) --export EXPORT
                         --index N [--json] CANDIDATE
    ledger-verify proof (--key VKEY | --key-file FILE) [--params CANDIDATE]
                        [--json] TLOG-PROOF
    ledger-verify tiers (--key VKEY | --key-file FILE) --export EXPORT
                        --index N [--json] DECLARATION
    ledger-verify digest [--allow-non-integer] [--canonical] [--json] FILE

Commands:
    export    Verify an export file offline against the ledger's verifier
              key: the checkpoint's signature, every entry's encoding, key,
              signature, index and prev link, that the entries are leaves
              of the checkpoint's tree, and, with --trusted, that the tree
              extends a checkpoint verified before.
    params    Verify an export, then say whether the candidate parameters
              (a JSON file) are exactly those entry N committed to:
              match, mismatch, or refused (outside the strict input domain).
    proof     Verify a C2SP tlog-proof@v1 file holding one entry: the
              checkpoint, the entry's signature, and its inclusion in the
              checkpoint's tree; with --params, compare candidate
              parameters with the entry's commitment.
    tiers     Verify an export, then say whether entry N was minimized
              under the action declaration DECLARATION (docs/declarations.md):
              its applied-tiers digest, and for a version 2 entry its action
              and action definition digest, recomputed from the file.
    digest    Print the parameter commitment of the JSON parameters in FILE
              ("-" reads standard input): the digest
              SHA-256("ledger/v1/params\n" || JCS(params)) and the size of
              the canonical form. Parameters outside the strict domain are
              refused with the kind of fault and its JSON pointer.

Options:
    --key VKEY            The ledger's note verifier key, name+hash+base64.
    --key-file FILE       A file holding the verifier key.
    --trusted CHECKPOINT  A signed checkpoint file verified before.
    --prev HASH           The entry hash (sha256:...) of the entry before the
                          export's range, from an earlier verified export.
    --all                 Report every failure, not only the first.
    --params CANDIDATE    (proof) Candidate parameters to compare.
    --json                Machine-readable output on standard output.
    --allow-non-integer   (digest) Admit numbers with a fractional part.
    --canonical           (digest) Write the canonical bytes instead.

Exit status: 0 verified (params: match), 1 verification failed (params:
mismatch or refused), 2 bad usage or unreadable input.

Examples:
    $ ledger-verify export --key-file ledger.vkey --trusted last.checkpoint export.ledger
    verified: entries 0 to 999 (1000 entries) of ledger.example.com/log
      checkpoint: tree size 1000
      last entry hash: sha256:...
    $ ledger-verify params --key-file ledger.vkey --export export.ledger --index 17 params.json
    match: entry 17 committed to exactly these parameters
    $ ledger-verify digest testdata/commit/example-payment.json
    digest sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8
    size   146
`

// Exit statuses.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	programName = "ledger-verify"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "digest":
		return runDigest(args[1:], stdin, stdout, stderr)
	case "export":
		return runExport(args[1:], stdout, stderr)
	case "params":
		return runParams(args[1:], stdout, stderr)
	case "proof":
		return runProof(args[1:], stdout, stderr)
	case "tiers":
		return runTiers(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	errorf(stderr, "unknown command %q", args[0])
	hintf(stderr, "run %s --help for the list of commands", programName)
	return exitUsage
}

// errorf and hintf write a line to standard error, escaped (printLine):
// the message may quote input.
func errorf(w io.Writer, format string, args ...any) {
	printLine(w, "%s: error: %s", programName, fmt.Sprintf(format, args...))
}

func hintf(w io.Writer, format string, args ...any) {
	printLine(w, "%s: hint: %s", programName, fmt.Sprintf(format, args...))
}

// readInput reads a named file, or standard input for "-".
func readInput(name string, stdin io.Reader, limit int) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	// Read one byte past the limit so the domain reports too_large itself.
	return io.ReadAll(io.LimitReader(r, int64(limit)+1))
}

func runDigest(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("digest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	allowNonInteger := fs.Bool("allow-non-integer", false, "")
	canonicalOut := fs.Bool("canonical", false, "")
	jsonOut := fs.Bool("json", false, "")
	if err := fs.Parse(args); err != nil {
		errorf(stderr, "digest: %v", err)
		hintf(stderr, "usage: %s digest [--allow-non-integer] [--canonical] [--json] FILE", programName)
		return exitUsage
	}
	if fs.NArg() != 1 {
		errorf(stderr, "digest takes exactly one FILE (\"-\" for standard input)")
		hintf(stderr, "usage: %s digest [--allow-non-integer] [--canonical] [--json] FILE", programName)
		return exitUsage
	}
	if *canonicalOut && *jsonOut {
		errorf(stderr, "digest: --canonical and --json exclude each other")
		return exitUsage
	}
	name := fs.Arg(0)
	domain := commit.Domain{AllowNonInteger: *allowNonInteger}
	raw, err := readInput(name, stdin, commit.DefaultMaxBytes)
	if err != nil {
		errorf(stderr, "%v", err)
		return exitUsage
	}

	c, err := domain.Params(raw)
	var de *commit.DomainError
	if errors.As(err, &de) {
		return reportRefusal(stdout, stderr, name, de, *jsonOut)
	}
	if err != nil {
		errorf(stderr, "%s: %v", quote(name), err)
		return exitFailed
	}

	switch {
	case *canonicalOut:
		canonical, err := domain.Canonicalize(raw)
		if err != nil { // Params accepted raw, so this cannot happen
			errorf(stderr, "%s: %v", quote(name), err)
			return exitFailed
		}
		stdout.Write(canonical)
	case *jsonOut:
		writeJSON(stdout, map[string]any{"result": "ok", "digest": c.Digest, "size": c.Size})
	default:
		printLine(stdout, "digest %s", c.Digest)
		printLine(stdout, "size   %d", c.Size)
	}
	return exitOK
}

func reportRefusal(stdout, stderr io.Writer, name string, de *commit.DomainError, jsonOut bool) int {
	if jsonOut {
		writeJSON(stdout, map[string]any{"result": "refused", "refusal": refusalJSON(de)})
		return exitFailed
	}
	errorf(stderr, "%s: parameters refused: %v", quote(name), de)
	switch de.Kind {
	case commit.ErrNotNFC:
		hintf(stderr, "the strict domain never normalizes Unicode; convert the text to NFC on purpose before committing")
	case commit.ErrNonInteger:
		hintf(stderr, "send amounts as integers in minor units, or pass --allow-non-integer if the deployment admits other numbers")
	case commit.ErrIntegerRange:
		hintf(stderr, "integers must lie within ±9007199254740991; send larger values as strings")
	}
	hintf(stderr, "docs/commitment.md lists every rule of the strict domain")
	return exitFailed
}

// refusalJSON is the machine form of a strict-domain refusal: kind and
// place, never the value.
func refusalJSON(de *commit.DomainError) map[string]any {
	return map[string]any{"kind": de.Kind, "pointer": de.Pointer, "in_name": de.Key, "offset": de.Offset}
}

// writeJSON writes v as one line of JSON, escaping what strconv.IsPrint
// refuses (jsonEscape) so that the text is safe on a terminal and decodes
// to exactly the same values.
func writeJSON(w io.Writer, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // maps of strings, numbers and digests: it cannot fail
	w.Write(jsonEscape(b.Bytes()))
}
